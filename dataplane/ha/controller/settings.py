"""Controller settings: environment (``MQ_CONTROLLER_*``) then CLI overrides."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ("ControllerSettings",)


class ControllerSettings(BaseSettings):
    """One controller process. Env vars: ``MQ_CONTROLLER_<FIELD>`` (e.g. MQ_CONTROLLER_DB)."""

    model_config = SettingsConfigDict(env_prefix="MQ_CONTROLLER_", extra="forbid")

    listen: str = "127.0.0.1:9878"
    # sqlite:///PATH (standalone) or postgresql://... (production; shared by every controller)
    db: str = "sqlite:///./data/controller/controller.db"
    # Id written into the lease row; brokers are redirected to it. Default: the listen address.
    controller_id: str = ""
    # The active controller renews its lease every lease_ttl_s / 3; a standby takes over after it expires.
    lease_ttl_s: float = Field(default=3.0, gt=0)
    # A master that has not heartbeat for this long is replaced (must exceed broker_lease_s).
    master_timeout_s: float = Field(default=2.5, gt=0)
    # How long a master may acknowledge writes after sending a heartbeat that was answered.
    broker_lease_s: float = Field(default=1.5, gt=0)
    tick_s: float = Field(default=0.1, gt=0)

    @property
    def identity(self) -> str:
        return self.controller_id or self.listen
