"""Access keys: the credentials tenant SDKs sign requests with."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from tenants.choices import AccessKeyStatus
from tenants.models.provisioned import ProvisionedModel
from tenants.models.tenants import Tenant

__all__ = ("AccessKey",)


class AccessKey(ProvisionedModel):
    """An access key of one tenant.

    The secret is returned once, at creation; it is kept Fernet-encrypted (``tenants.crypto``)
    because brokers need the plain secret to verify HMAC signatures. A key works until it is
    revoked or its ``expires_at`` passes (set by a rotation to give clients an overlap window).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="access_keys")
    access_key = models.CharField(max_length=64, unique=True, editable=False)
    secret_encrypted = models.BinaryField(editable=False)
    description = models.CharField(max_length=200, blank=True)
    key_status = models.CharField(
        max_length=16, choices=AccessKeyStatus.choices, default=AccessKeyStatus.ACTIVE
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    rotated_from = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="rotated_to"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("tenant", "-created")

    def __str__(self) -> str:
        return self.access_key

    @property
    def is_usable(self) -> bool:
        """Whether brokers should accept signatures made with this key right now."""
        if self.key_status != AccessKeyStatus.ACTIVE:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()
