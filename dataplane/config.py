"""Broker settings: environment (``MQ_BROKER_*``), an optional TOML/JSON file, then CLI overrides."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dataplane.cpu_affinity import parse_cpu_list
from dataplane.event_loop import EventLoopKind, uvloop_installed
from dataplane.grpc_core import DEFAULT_GRPC_EXPERIMENTS
from dataplane.loop_cpu import parse_loop_cpu

__all__ = ("BrokerSettings", "load_settings")


def _ram_bytes() -> int:
    """Physical memory of this machine (8 GiB where the platform does not tell)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


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
    # Produce is refused ("disk is full") above this used ratio or below this many free bytes.
    disk_full_ratio: float = Field(default=0.95, gt=0, le=1)
    disk_min_free_bytes: int = Field(default=64 << 20, ge=0)
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
    # Receipt handles issued (docs/broker.md): 2 (keyed BLAKE2b), or 1 (HMAC-SHA256) while a rolling
    # upgrade from brokers that verify only version 1 is under way; both versions are verified.
    receipt_handle_version: int = Field(default=2, ge=1, le=2)
    auto_create_groups: bool = False
    grace_seconds: float = Field(default=5.0, ge=0)
    # In-flight journal is compacted into a snapshot after this many records, or after as many as
    # the last snapshot had entries when that is more (dataplane/pop.py).
    pop_journal_compact_records: int = Field(default=50_000, ge=100)
    # A broadcast member (one position per client id) that has not received for this long is
    # dropped with its offsets (docs/broker.md); as Kafka's offsets.retention.minutes, a week.
    broadcast_member_idle_hours: float = Field(default=168.0, gt=0)
    broadcast_expire_check_s: float = Field(default=600.0, gt=0)
    # Receives with auto_renew (push consumers; dataplane/auto_renew.py): every period, messages
    # within ``ahead`` of coming back are kept invisible ``slice`` more while their client is
    # connected, for at most ``max`` after the receive; a gone client's come back after ``released``.
    # The proxy's defaults (renewAheadTimeMillis, renewMaxTimeMillis, renewSchedulePeriodMillis).
    auto_renew_period_s: float = Field(default=5.0, gt=0)
    auto_renew_ahead_ms: int = Field(default=10_000, ge=0)
    auto_renew_slice_ms: int = Field(default=60_000, ge=1000)
    auto_renew_max_ms: int = Field(default=3 * 3600 * 1000, ge=0)
    auto_renew_released_ms: int = Field(default=1_000, ge=0)
    # A client whose Telemetry stream ended and that made no call for this long has gone (a crash):
    # its renewed messages are released then, not at their next renewal check.
    auto_renew_gone_after_s: float = Field(default=10.0, gt=0)
    # Delay messages: the furthest delivery_timestamp accepted (the timer wheel spans twice this).
    max_delay_ms: int = Field(default=3 * 86_400_000, ge=1000)
    # Transactions (docs/transactions.md): a half message is checked back once it is this old
    # (RocketMQ's transactionTimeOut), then every check interval, doubling up to the max backoff;
    # after max_transaction_checks unanswered checks it is rolled back.
    transaction_timeout_ms: int = Field(default=6_000, ge=0)
    transaction_check_interval_ms: int = Field(default=60_000, ge=100)
    transaction_check_max_backoff_ms: int = Field(default=600_000, ge=100)
    max_transaction_checks: int = Field(default=15, ge=0)
    # Retry backoff (docs/broker.md) of groups without a retry policy; empty: at once when the
    # invisible time ends. RocketMQ's ladder is dataplane.retry.ROCKETMQ_RETRY_DELAYS_MS.
    default_retry_delays_ms: list[int] = Field(default_factory=list)
    # Message trace (docs/trace.md): events written to the rmq_sys_TRACE_DATA topic.
    trace_enabled: bool = True
    # The event loop (dataplane/event_loop.py): uvloop makes every gRPC call cheaper; asyncio to compare.
    event_loop: EventLoopKind = "uvloop"
    # gRPC C-core experiments set before grpc is imported (dataplane/grpc_core.py): the default keeps
    # a server's socket I/O on the thread that polls for completions. Empty: grpcio's own defaults.
    # GRPC_EXPERIMENTS in the environment wins. Applies to nodes started by ``mqctl broker start``.
    grpc_experiments: str = DEFAULT_GRPC_EXPERIMENTS
    # CPUs the node's threads run on, a Linux CPU list ("0", "0-1,4"); empty: wherever the kernel puts
    # them. One CPU spares gRPC's hand-overs between its polling thread and the loop a wake-up of
    # another CPU each (dataplane/cpu_affinity.py). Applies to nodes started by ``mqctl broker start``.
    cpu_affinity: str = ""
    # The CPU the event loop's thread and gRPC's polling thread share, every other thread running
    # anywhere (dataplane/loop_cpu.py): "auto" (the CPU the fewest other nodes of the host keep their
    # loops on), a CPU number, or empty (off).
    # Their hand-overs then wake no other CPU. Applies to nodes started by ``mqctl broker start``.
    loop_cpu: str = "auto"
    # The file in which the nodes of this host note their loops' CPUs, so that ``auto`` spreads them
    # (dataplane/loop_cpu.py, Placements); unset: one per user in /dev/shm.
    loop_cpu_placements: Path | None = None
    # Freeze the objects alive once the node listens out of the garbage collector's full walks
    # (dataplane/heap.py): then no full collection stalls the loop for long. Off only to compare.
    gc_freeze: bool = True
    # HA, controller mode (docs/ha.md). ``controller``: comma-separated controller HOST:PORTs; empty =
    # a standalone node. The group is ``broker_name``; ``ha_node`` names this node in it (default: listen).
    controller: str = ""
    ha_node: str = ""
    ha_listen: str = "127.0.0.1:10912"
    ha_advertise: str = ""
    # Shared secret of the broker group's replication port (docs/ha.md): replicas and master prove
    # it to each other (HMAC challenge-response). Unset: derived from admin_token; in development
    # mode without either, a fixed development key.
    ha_secret: SecretStr | None = None
    # Copies (master included) that must hold a message before SEND_OK; per topic only where stricter.
    min_in_sync_replicas: int = Field(default=1, ge=1)
    min_in_sync_replicas_per_topic: dict[str, int] = Field(default_factory=dict)
    ha_ack_timeout_ms: int = Field(default=3_000, ge=1)
    ha_heartbeat_interval_ms: int = Field(default=300, ge=10)
    # A replica leaves the in-sync set after this long not within ha_max_gap_bytes of the master.
    ha_in_sync_timeout_ms: int = Field(default=3_000, ge=10)
    ha_max_gap_bytes: int = Field(default=1 << 20, ge=0)
    # RocketMQ's suggested read (docs/ha.md): a pull whose first message lies further than this behind
    # the CommitLog's end is answered with records read from an in-sync replica, keeping cold reads
    # off the master's disk and page cache. Default 40 % of RAM (accessMessageInMemoryMaxRatio), what
    # the page cache may hold; 0 turns it off.
    replica_read_behind_bytes: int = Field(default_factory=lambda: _ram_bytes() * 2 // 5, ge=0)
    # Tiered storage (docs/tiered-storage.md): sealed CommitLog segments are offloaded to an object
    # store and read back from it. URL: file:///dir (empty: {data_dir}/tiered-objects), s3://bucket/
    # prefix, gs://bucket/prefix, az://container/prefix; objects go under {url}/{broker_name}/.
    tier_enabled: bool = False
    tier_url: str = ""
    # S3-compatible stores: endpoint (MinIO, Ceph, moto; empty: AWS), region and credentials.
    tier_endpoint: str = ""
    tier_region: str = ""
    tier_access_key_id: str = ""
    tier_secret_access_key: SecretStr = SecretStr("")
    # Offload a sealed segment once it is this old, or sooner while more sealed bytes wait.
    tier_offload_after_ms: int = Field(default=600_000, ge=0)
    tier_offload_pending_bytes: int = Field(default=2 << 30, ge=0)
    # Retention of topics without their own (retention_hours / tiered_retention_hours = 0 for hot).
    tier_hot_retention_hours: float = Field(default=72.0, ge=0)
    tier_retention_hours: float = Field(default=720.0, ge=0)
    # Cold reads: block cache size, block (ranged GET) size, read-ahead blocks for sequential readers.
    tier_cache_bytes: int = Field(default=64 << 20, ge=1 << 16)
    tier_block_bytes: int = Field(default=1 << 20, ge=4096)
    tier_prefetch_blocks: int = Field(default=4, ge=0)
    tier_interval_ms: int = Field(default=5_000, ge=10)
    tier_request_timeout_s: float = Field(default=30.0, gt=0)
    # Offload bandwidth limit in bytes/s, paced per 1 MiB read by the upload process (0: unlimited).
    tier_offload_rate_bytes: int = Field(default=0, ge=0)
    # Security (docs/security.md). Development mode admits unsigned v2 requests and, without an
    # admin token, the admin API; never use it where the port is reachable by others.
    dev_mode: bool = False
    # Operator credential of the admin API (``authorization: Bearer TOKEN``).
    admin_token: SecretStr | None = None
    # TLS on the gRPC port when both are set (PEM files).
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    # Quotas (docs/security.md): limits are cluster-wide; this node enforces limit / quota_nodes.
    quota_nodes: int = Field(default=1, ge=1)
    # With peers (admin HOST:PORTs of the other nodes serving the cluster's writes) a node enforces its
    # share of the tenant's / topic's queues instead, re-read from them every quota_rebalance_s.
    quota_peers: list[str] = Field(default_factory=list)
    quota_rebalance_s: float = Field(default=30.0, gt=0)
    quota_burst_s: float = Field(default=1.0, gt=0)
    # Metering (docs/metering.md): root directory or file:// URL, default {data_dir}/../metering.
    metering_dir: str = ""
    metering_flush_s: float = Field(default=60.0, gt=0)
    lag_sample_s: float = Field(default=30.0, gt=0)
    storage_sample_s: float = Field(default=3600.0, gt=0)
    storage_scan_s: float = Field(default=5.0, gt=0)

    @field_validator("event_loop")
    @classmethod
    def _loop_installed(cls, kind: EventLoopKind) -> EventLoopKind:
        if kind == "uvloop" and not uvloop_installed():
            raise ValueError("the uvloop package is not installed: set MQ_BROKER_EVENT_LOOP=asyncio")
        return kind

    @field_validator("cpu_affinity")
    @classmethod
    def _cpu_list(cls, text: str) -> str:
        if text.strip():
            parse_cpu_list(text)  # the CPUs themselves are checked where they are applied
        return text

    @field_validator("loop_cpu")
    @classmethod
    def _loop_cpu(cls, text: str) -> str:
        return parse_loop_cpu(text)

    @model_validator(mode="after")
    def _replication_secret(self) -> BrokerSettings:
        if self.controller.strip() and not (self.ha_secret or self.admin_token or self.dev_mode):
            raise ValueError(
                "HA (controller is set) needs a replication secret: set MQ_BROKER_HA_SECRET (the same "
                "on every node of the group) or MQ_BROKER_ADMIN_TOKEN, or use development mode (--dev)"
            )
        return self


def load_settings(config_file: Path | None = None, **overrides: Any) -> BrokerSettings:
    """Build settings; precedence: CLI overrides > file > environment > defaults."""
    file_values: dict[str, Any] = {}
    if config_file is not None:
        text = config_file.read_text()
        file_values = json.loads(text) if config_file.suffix == ".json" else tomllib.loads(text)
        file_values = dict(file_values.get("broker", file_values))
    merged = {**file_values, **{k: v for k, v in overrides.items() if v is not None}}
    return BrokerSettings(**merged)
