"""The platform's environment, read once through pydantic-settings.

Every knob the control plane has is an environment variable; Django's ``settings.py`` only reads from
the ``PlatformSettings`` instance built here, so there is one configuration system, not two.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ("PlatformSettings", "default_data_dir", "get_settings")


def default_data_dir() -> Path:
    """The embedded default data directory: ``.data`` next to ``manage.py``."""
    return Path(__file__).resolve().parent.parent / ".data"


class PlatformSettings(BaseSettings):
    """Control-plane settings; unprefixed names follow the twelve-factor conventions."""

    model_config = SettingsConfigDict(env_prefix="", extra="ignore", case_sensitive=False)

    debug: bool = Field(default=False, alias="DEBUG")
    secret_key: SecretStr | None = Field(default=None, alias="SECRET_KEY")
    # Fernet key for access-key secrets at rest; derived from SECRET_KEY when unset.
    secrets_key: SecretStr | None = Field(default=None, alias="MQ_SECRETS_KEY")
    allowed_hosts: str = Field(default="localhost,127.0.0.1,[::1]", alias="ALLOWED_HOSTS")
    csrf_trusted_origins: str = Field(default="", alias="CSRF_TRUSTED_ORIGINS")
    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    celery_broker_url: str | None = Field(default=None, alias="CELERY_BROKER_URL")
    data_dir: Path = Field(default_factory=default_data_dir, alias="MQ_DATA_DIR")
    # Secure cookies and HSTS need TLS in front of the app; standalone on loopback serves plain HTTP.
    secure_cookies: bool = Field(default=True, alias="MQ_SECURE_COOKIES")
    ssl_redirect: bool = Field(default=True, alias="MQ_SSL_REDIRECT")
    hsts_seconds: int = Field(default=31536000, alias="MQ_HSTS_SECONDS")
    log_level: str = Field(default="INFO", alias="MQ_LOG_LEVEL")
    reconcile_interval_s: float = Field(default=60.0, alias="MQ_RECONCILE_INTERVAL_S")
    # Console sign-in throttling: after this many failures for one username or one client address
    # within the window, sign-in answers 429 until the window has passed. A shared cache
    # (MQ_CACHE_URL=redis://...) makes the count hold across web workers and hosts.
    login_max_failures: int = Field(default=5, ge=1, alias="MQ_LOGIN_MAX_FAILURES")
    login_window_s: int = Field(default=300, ge=1, alias="MQ_LOGIN_WINDOW_S")
    cache_url: str | None = Field(default=None, alias="MQ_CACHE_URL")
    # The production HTTP server (gunicorn, config/gunicorn.py): where it listens, how many workers.
    http_listen: str = Field(default="127.0.0.1:8000", alias="MQ_HTTP_LISTEN")
    web_concurrency: int = Field(default=2, ge=1, alias="WEB_CONCURRENCY")
    # Nightly analytics (docs/analytics.md): when beat starts them (UTC, HH:MM), where Spark runs,
    # where the metering records are and where the results go.
    analytics_nightly_at: str = Field(
        default="02:30", alias="MQ_ANALYTICS_NIGHTLY_AT", pattern=r"^(off|([01]\d|2[0-3]):[0-5]\d)$"
    )
    spark_master: str = Field(default="local[*]", alias="SPARK_MASTER")
    metering_url: str | None = Field(default=None, alias="MQ_METERING_URL")
    analytics_url: str | None = Field(default=None, alias="MQ_ANALYTICS_URL")
    analytics_late_days: int = Field(default=3, alias="MQ_ANALYTICS_LATE_DAYS", ge=0, le=31)
    analytics_stuck_minutes: int = Field(default=10, alias="MQ_ANALYTICS_STUCK_MINUTES", ge=1, le=60)
    analytics_timeout_s: float = Field(default=3 * 3600.0, alias="MQ_ANALYTICS_TIMEOUT_S", gt=0)

    def nightly_hour_minute(self) -> tuple[int, int] | None:
        """When beat starts the nightly jobs, or None for ``off`` (run them by hand or elsewhere)."""
        if self.analytics_nightly_at == "off":
            return None
        hour, minute = self.analytics_nightly_at.split(":")
        return int(hour), int(minute)

    # Outgoing mail (alert rules' e-mail notifications) through an SMTP relay.
    email_host: str = Field(default="localhost", alias="MQ_EMAIL_HOST")
    email_port: int = Field(default=25, alias="MQ_EMAIL_PORT", ge=1, le=65535)
    email_user: str = Field(default="", alias="MQ_EMAIL_USER")
    email_password: SecretStr | None = Field(default=None, alias="MQ_EMAIL_PASSWORD")
    email_use_tls: bool = Field(default=False, alias="MQ_EMAIL_USE_TLS")
    email_from: str = Field(default="MQCloud alerts <alerts@localhost>", alias="MQ_EMAIL_FROM")
    # Alert webhooks to loopback/private/link-local addresses are refused (SSRF) unless this is set.
    alert_webhook_allow_private: bool = Field(default=False, alias="MQ_ALERT_WEBHOOK_ALLOW_PRIVATE")

    # The brokers' operator credential (their MQ_BROKER_ADMIN_TOKEN) and, for TLS brokers, the CA.
    broker_admin_token: SecretStr | None = Field(default=None, alias="MQ_BROKER_ADMIN_TOKEN")
    broker_tls_ca_file: Path | None = Field(default=None, alias="MQ_BROKER_TLS_CA_FILE")

    def split_hosts(self) -> list[str]:
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()]

    def split_origins(self) -> list[str]:
        return [o.strip() for o in self.csrf_trusted_origins.split(",") if o.strip()]


@lru_cache(maxsize=1)
def get_settings() -> PlatformSettings:
    return PlatformSettings()
