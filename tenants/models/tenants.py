"""The tenant: the unit of isolation, owning one namespace on every broker."""

from __future__ import annotations

from django.db import models

from tenants.choices import TenantStatus

__all__ = ("Tenant",)


class Tenant(models.Model):
    """A customer of the platform; its namespace qualifies every resource name on the brokers."""

    name = models.CharField(max_length=100)
    namespace = models.SlugField(max_length=64, unique=True, help_text="Unique platform-wide.")
    status = models.CharField(max_length=16, choices=TenantStatus.choices, default=TenantStatus.ACTIVE)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("namespace",)

    def __str__(self) -> str:
        return self.namespace
