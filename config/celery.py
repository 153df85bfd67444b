"""The Celery application: configuration comes from Django settings under the CELERY_ namespace."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("mqcloud")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _use_django_logging(**_: object) -> None:
    """Leave logging to Django's LOGGING instead of letting Celery replace it."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)


__all__ = ("app",)
