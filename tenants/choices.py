"""Choice sets for tenant-owned models."""

from django.db import models

__all__ = ("TenantStatus",)


class TenantStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    SUSPENDED = "suspended", "Suspended"
