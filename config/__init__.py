"""Django project configuration: settings from the environment, root URLs, ASGI/WSGI and Celery."""

from config.celery import app as celery_app

__all__ = ("celery_app",)
