"""The abstract base of everything the control plane pushes to brokers."""

from __future__ import annotations

from django.db import models

from tenants.choices import ProvisioningStatus

__all__ = ("ProvisionedModel",)


class ProvisionedModel(models.Model):
    """Desired state plus where it stands on the brokers.

    ``generation`` goes up on every change of desired state; a provisioning task marks the row
    ``active`` only if the generation it applied is still the current one, so a late task never
    hides a newer change.
    """

    status = models.CharField(
        max_length=16, choices=ProvisioningStatus.choices, default=ProvisioningStatus.PROVISIONING
    )
    status_message = models.TextField(blank=True, help_text="Why the last apply failed, when it did.")
    generation = models.PositiveIntegerField(default=1)
    applied_generation = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
