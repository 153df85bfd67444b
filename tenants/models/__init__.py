"""Tenant models, one module per domain, re-exported here."""

from tenants.models.tenants import Tenant

__all__ = ("Tenant",)
