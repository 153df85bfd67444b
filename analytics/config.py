"""Settings of the Spark jobs, read from the environment (the same names the control plane uses)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ("AnalyticsSettings", "default_data_dir")


def default_data_dir() -> Path:
    """``.data`` next to ``manage.py``, as for the control plane and ``mqctl standalone``."""
    return Path(__file__).resolve().parent.parent / ".data"


class AnalyticsSettings(BaseSettings):
    """Where the jobs read and write, which Spark master they use, and the report thresholds."""

    model_config = SettingsConfigDict(env_prefix="", extra="ignore", case_sensitive=False)

    data_dir: Path = Field(default_factory=default_data_dir, alias="MQ_DATA_DIR")
    # The metering root (docs/metering.md) and the control-plane exports next to it.
    metering_url: str | None = Field(default=None, alias="MQ_METERING_URL")
    output_url: str | None = Field(default=None, alias="MQ_ANALYTICS_URL")
    spark_master: str = Field(default="local[*]", alias="SPARK_MASTER")
    shuffle_partitions: int = Field(default=8, alias="MQ_ANALYTICS_SHUFFLE_PARTITIONS", ge=1)
    late_days: int = Field(default=3, alias="MQ_ANALYTICS_LATE_DAYS", ge=0, le=31)
    stuck_minutes: int = Field(default=10, alias="MQ_ANALYTICS_STUCK_MINUTES", ge=1, le=60)

    def input_root(self) -> str:
        return self.metering_url or str(self.data_dir / "metering")

    def output_root(self) -> str:
        return self.output_url or str(self.data_dir / "analytics")
