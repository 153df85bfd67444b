"""Django settings, all read from the environment through ``config.env.PlatformSettings``.

With DEBUG off (the default) everything is production-safe and ``manage.py check --deploy`` is clean;
``mqctl standalone`` relaxes only what plain HTTP on loopback needs (secure cookies, SSL redirect).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from celery.schedules import crontab

from config.env import get_settings

ENV = get_settings()
BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = ENV.data_dir.resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept in the data dir (0600)."""
    if ENV.secret_key is not None:
        return ENV.secret_key.get_secret_value()
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(64))
    return path.read_text().strip()


DEBUG = ENV.debug
SECRET_KEY = _secret_key()
MQ_SECRETS_KEY = ENV.secrets_key.get_secret_value() if ENV.secrets_key else None
# Operator credential and CA the control plane uses on brokers' admin API (docs/security.md).
BROKER_ADMIN_TOKEN = ENV.broker_admin_token.get_secret_value() if ENV.broker_admin_token else None
BROKER_TLS_CA_FILE = ENV.broker_tls_ca_file
LOGIN_MAX_FAILURES = ENV.login_max_failures
LOGIN_WINDOW_S = ENV.login_window_s
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": ENV.cache_url}
        if ENV.cache_url
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
ALLOWED_HOSTS = ENV.split_hosts()
CSRF_TRUSTED_ORIGINS = ENV.split_origins()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "tenants",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.navigation",
            ],
        },
    },
]

DATABASES: dict[str, Any] = {
    "default": dj_database_url.parse(
        ENV.database_url or f"sqlite:///{DATA_DIR / 'mqcloud.sqlite3'}",
        conn_max_age=60 if ENV.database_url else 0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded database has writers in two processes (the API and the Celery worker). A deferred
    # transaction that reads and then writes gets "database is locked" at once, without waiting, when
    # the other process writes first; IMMEDIATE takes the write lock at BEGIN, where the busy timeout
    # applies. WAL lets readers go on while one writes.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL;",
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns about a missing root even when finders serve
# Standalone serves static files straight from the app directories; production runs collectstatic.
WHITENOISE_USE_FINDERS = True
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

#
# Security: production-safe unless the environment relaxes it
#
SESSION_COOKIE_SECURE = ENV.secure_cookies
CSRF_COOKIE_SECURE = ENV.secure_cookies
SECURE_SSL_REDIRECT = ENV.ssl_redirect
SECURE_HSTS_SECONDS = ENV.hsts_seconds if ENV.ssl_redirect else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

#
# REST API
#
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
        "rest_framework.filters.SearchFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "tenants.api.exceptions.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "MQCloud control plane API",
    "DESCRIPTION": "Tenants, topics, consumer groups, access keys, ACLs, quotas and broker clusters.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Several models have a "status" field with different choice sets; name each enum explicitly.
    "ENUM_NAME_OVERRIDES": {
        "TenantStatusEnum": "tenants.choices.TenantStatus",
        "ProvisioningStatusEnum": "tenants.choices.ProvisioningStatus",
        "AccessKeyStatusEnum": "tenants.choices.AccessKeyStatus",
    },
}

#
# Celery: an embedded filesystem transport unless CELERY_BROKER_URL names a server
#
CELERY_QUEUE_DIR = DATA_DIR / "celery" / "queue"
CELERY_BROKER_URL = ENV.celery_broker_url or "filesystem://"
# kombu's filesystem transport with each message written whole before readers can see it
CELERY_BROKER_TRANSPORT = None if ENV.celery_broker_url else "config.celery_transport:Transport"
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = (
    {}
    if ENV.celery_broker_url
    else {
        "data_folder_in": str(CELERY_QUEUE_DIR),
        "data_folder_out": str(CELERY_QUEUE_DIR),
        "processed_folder": str(DATA_DIR / "celery" / "processed"),
        # kombu would otherwise write its broadcast exchange files into the working directory
        "control_folder": str(DATA_DIR / "celery" / "control"),
        "store_processed": False,
    }
)
if not ENV.celery_broker_url:
    CELERY_QUEUE_DIR.mkdir(parents=True, exist_ok=True)
    (DATA_DIR / "celery" / "processed").mkdir(parents=True, exist_ok=True)
    (DATA_DIR / "celery" / "control").mkdir(parents=True, exist_ok=True)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Two queues. The default one carries provisioning, reconcile passes and the minute checks; the
# nightly Spark jobs go to one of their own, consumed by a worker of its own (``-Q analytics``):
# a job runs for minutes, and on a shared worker it held the slots provisioning waits for
# (docs/operations.md, "Celery queues"). Every worker names its queue with -Q.
CELERY_TASK_DEFAULT_QUEUE = "celery"
MQ_ANALYTICS_QUEUE = "analytics"
CELERY_TASK_ROUTES = {"tenants.run_analytics_job": {"queue": MQ_ANALYTICS_QUEUE}}
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celery" / "beat-schedule")
# beat's schedule file lives there whatever the broker: without the folder beat stops at start
# (FileNotFoundError), and no reconcile or nightly job ever runs
(DATA_DIR / "celery").mkdir(parents=True, exist_ok=True)
_NIGHTLY = ENV.nightly_hour_minute()
CELERY_BEAT_SCHEDULE: dict[str, Any] = {
    "reconcile-brokers": {
        "task": "tenants.reconcile_brokers",
        "schedule": ENV.reconcile_interval_s,
        "options": {"expires": ENV.reconcile_interval_s},
    },
    # Alert rules (lag / dead-letter thresholds per consumer group): checked every minute.
    "evaluate-alert-rules": {
        "task": "tenants.evaluate_alert_rules",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
    # Every active group's lag, for the group page's lag-over-time chart.
    "sample-group-lag": {
        "task": "tenants.sample_group_lag",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
    # Yesterday's billing and lag reports (plus changed late days), every night at MQ_ANALYTICS_NIGHTLY_AT
    # (not at all when it is "off").
    **(
        {
            f"analytics-{job}-nightly": {
                "task": "tenants.run_analytics_job",
                "schedule": crontab(hour=_NIGHTLY[0], minute=_NIGHTLY[1]),
                "kwargs": {"job": job, "trigger": "schedule"},
            }
            for job in ("billing", "lag")
        }
        if _NIGHTLY is not None
        else {}
    ),
}
CELERY_TIMEZONE = "UTC"
# Alert webhooks to loopback/private addresses are refused (SSRF) unless this is set (tests, labs).
MQ_ALERT_WEBHOOK_ALLOW_PRIVATE = ENV.alert_webhook_allow_private

# Outgoing mail: alert rules' e-mail notifications.
EMAIL_HOST = ENV.email_host
EMAIL_PORT = ENV.email_port
EMAIL_HOST_USER = ENV.email_user
EMAIL_HOST_PASSWORD = ENV.email_password.get_secret_value() if ENV.email_password else ""
EMAIL_USE_TLS = ENV.email_use_tls
EMAIL_TIMEOUT = 10  # an SMTP relay that hangs must not hold the alert evaluation
DEFAULT_FROM_EMAIL = ENV.email_from

#
# Analytics (Spark jobs in analytics/, launched by tenants.run_analytics_job through spark-submit)
#
MQ_ANALYTICS: dict[str, Any] = {
    "SPARK_MASTER": ENV.spark_master,
    "INPUT_URL": ENV.metering_url or str(DATA_DIR / "metering"),
    "OUTPUT_URL": ENV.analytics_url or str(DATA_DIR / "analytics"),
    "LATE_DAYS": ENV.analytics_late_days,
    "STUCK_MINUTES": ENV.analytics_stuck_minutes,
    "TIMEOUT_S": ENV.analytics_timeout_s,
}

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": ENV.log_level},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
