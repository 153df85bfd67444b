from django.apps import AppConfig


class TenantsConfig(AppConfig):
    """Tenants, their resources, access and quotas: the control plane's source of truth."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "tenants"
