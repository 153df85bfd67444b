from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The web admin console."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "console"
