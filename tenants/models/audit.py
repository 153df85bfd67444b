"""The audit trail: one row per mutating action, kept after the object (and tenant) are gone."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tenants.choices import AuditAction
from tenants.models.tenants import Tenant

__all__ = ("AuditEvent",)


class AuditEvent(models.Model):
    """Who did what to which object, from where, with the state before and after."""

    created = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="Kept when the user is deleted.")
    tenant = models.ForeignKey(
        Tenant, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_events"
    )
    tenant_namespace = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=16, choices=AuditAction.choices)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    source_ip = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ("-created", "-id")
        indexes = (models.Index(fields=("tenant", "-created"), name="tenants_audit_tenant_created"),)

    def __str__(self) -> str:
        return f"{self.actor_name} {self.action} {self.object_type}:{self.object_id}"
