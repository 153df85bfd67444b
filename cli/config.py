"""mqctl's settings: every option can come from an MQCTL_ environment variable."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ("AppEnvVars", "CliSettings")


class AppEnvVars(StrEnum):
    """Environment variable names mqctl reads; they appear in the help text."""

    API_URL = "MQCTL_API_URL"
    TOKEN = "MQCTL_TOKEN"
    DATA_DIR = "MQ_DATA_DIR"
    BROKER = "MQCTL_BROKER"
    DEBUG = "MQCTL_DEBUG"


class CliSettings(BaseSettings):
    """Defaults for the control-plane client; flags override them."""

    model_config = SettingsConfigDict(env_prefix="MQCTL_", extra="ignore")

    api_url: str = "http://127.0.0.1:8000"
    token: SecretStr | None = None
    broker: str = "127.0.0.1:8081"
    debug: bool = False
    data_dir: Path = Field(default=Path(".data"), alias="MQ_DATA_DIR")
