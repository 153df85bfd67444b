"""Broker settings: environment (``MQ_BROKER_*``), an optional TOML/JSON file, then CLI overrides."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ("BrokerSettings", "load_settings")


class BrokerSettings(BaseSettings):
    """Everything one broker node needs. Env vars: ``MQ_BROKER_<FIELD>`` (e.g. MQ_BROKER_LISTEN)."""

    model_config = SettingsConfigDict(env_prefix="MQ_BROKER_", env_nested_delimiter="__", extra="forbid")

    data_dir: Path = Path("./data/broker")
    listen: str = "127.0.0.1:8081"
    # Address put in routes when the client's access point cannot be echoed (empty: listen).
    advertise: str = ""
    broker_name: str = "broker-0"
    # host:port of the Prometheus endpoint; "0" or "" disables it.
    metrics_listen: str = "127.0.0.1:5557"
    flush: Literal["sync", "async"] = "async"
    commit_log_segment_bytes: int = Field(default=1 << 30, ge=4096)
    max_body_bytes: int = Field(default=4 << 20, ge=1)
    # gRPC frame limit; a little above max_body_bytes so oversized bodies get MESSAGE_BODY_TOO_LARGE.
    max_grpc_message_bytes: int = Field(default=16 << 20, ge=1 << 16)
    max_batch_messages: int = Field(default=1024, ge=1)
    max_keys: int = Field(default=64, ge=1)
    max_tag_length: int = Field(default=128, ge=1)
    max_properties: int = Field(default=128, ge=1)
    default_invisible_ms: int = Field(default=30_000, ge=1000)
    max_invisible_ms: int = Field(default=12 * 3600 * 1000, ge=1000)
    default_long_polling_ms: int = Field(default=20_000, ge=0)
    max_long_polling_ms: int = Field(default=30_000, ge=0)
    # Answer a long poll this long before the client's own timeout (the proxy does the same).
    long_polling_margin_ms: int = Field(default=1_000, ge=0)
    max_receive_batch: int = Field(default=64, ge=1)
    max_delivery_attempts: int = Field(default=16, ge=1)
    auto_create_groups: bool = False
    grace_seconds: float = Field(default=5.0, ge=0)
    # In-flight journal is compacted into a snapshot after this many records.
    pop_journal_compact_records: int = Field(default=50_000, ge=100)
    # Delay messages: the furthest delivery_timestamp accepted (the timer wheel spans twice this).
    max_delay_ms: int = Field(default=3 * 86_400_000, ge=1000)
    # Transactions (docs/transactions.md): a half message is checked back once it is this old
    # (RocketMQ's transactionTimeOut), then every check interval, doubling up to the max backoff;
    # after max_transaction_checks unanswered checks it is rolled back.
    transaction_timeout_ms: int = Field(default=6_000, ge=0)
    transaction_check_interval_ms: int = Field(default=60_000, ge=100)
    transaction_check_max_backoff_ms: int = Field(default=600_000, ge=100)
    max_transaction_checks: int = Field(default=15, ge=0)


def load_settings(config_file: Path | None = None, **overrides: Any) -> BrokerSettings:
    """Build settings; precedence: CLI overrides > file > environment > defaults."""
    file_values: dict[str, Any] = {}
    if config_file is not None:
        text = config_file.read_text()
        file_values = json.loads(text) if config_file.suffix == ".json" else tomllib.loads(text)
        file_values = dict(file_values.get("broker", file_values))
    merged = {**file_values, **{k: v for k, v in overrides.items() if v is not None}}
    return BrokerSettings(**merged)
