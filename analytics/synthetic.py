"""Metering records in exactly the format of docs/metering.md, for tests and benchmarks.

The broker writes these in production; here they are generated (seeded, so reproducible) with
replays (same id written again later, possibly with other counters) and late files.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = (
    "lag_record",
    "record_id",
    "storage_record",
    "synthetic_usage",
    "usage_record",
    "write_control_exports",
    "write_records",
)

Record = dict[str, Any]


def record_id(*parts: object) -> str:
    """The hex SHA-256 of the identifying fields joined by ``|`` (docs/metering.md)."""
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def usage_record(
    broker: str,
    tenant: str,
    minute: datetime,
    messages_in: int,
    bytes_in: int,
    messages_out: int,
    bytes_out: int,
    requests_in_4k: int,
    requests_out_4k: int,
    written_at: datetime,
    api_calls: dict[str, int] | None = None,
) -> Record:
    m = _stamp(minute.replace(second=0, microsecond=0))
    return {
        "id": record_id("usage", broker, tenant, m),
        "kind": "usage",
        "minute": m,
        "broker": broker,
        "tenant": tenant,
        "messages_in": messages_in,
        "bytes_in": bytes_in,
        "messages_out": messages_out,
        "bytes_out": bytes_out,
        "requests_in_4k": requests_in_4k,
        "requests_out_4k": requests_out_4k,
        "api_calls": api_calls if api_calls is not None else {"SendMessage": messages_in},
        "written_at": written_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
    }


def storage_record(
    broker: str, tenant: str, topic: str, ts: datetime, size: int, written_at: datetime
) -> Record:
    t = _stamp(ts)
    return {
        "id": record_id("storage", broker, tenant, topic, t),
        "kind": "storage",
        "broker": broker,
        "tenant": tenant,
        "topic": topic,
        "ts": t,
        "bytes": size,
        "written_at": written_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
    }


def lag_record(
    broker: str,
    tenant: str,
    group: str,
    topic: str,
    queue_id: int,
    ts: datetime,
    committed_offset: int,
    max_offset: int,
    lag_ms: int,
    written_at: datetime,
    inflight: int = 0,
) -> Record:
    t = _stamp(ts)
    return {
        "id": record_id("lag", broker, group, topic, queue_id, t),
        "kind": "lag",
        "broker": broker,
        "tenant": tenant,
        "ts": t,
        "group": group,
        "topic": topic,
        "queue_id": queue_id,
        "lag_messages": max_offset - committed_offset,
        "lag_ms": lag_ms,
        "inflight": inflight,
        "committed_offset": committed_offset,
        "max_offset": max_offset,
        "written_at": written_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
    }


def _when(record: Record) -> str:
    return str(record.get("minute") or record["ts"])


def write_records(root: Path, tree: str, records: Iterable[Record], seq: int = 0) -> list[Path]:
    """Write records into hourly files per broker, each file in full (temp file + rename)."""
    buckets: dict[tuple[str, str, str], list[Record]] = defaultdict(list)
    for r in records:
        when = _when(r)
        buckets[(when[:10], when[11:13], str(r["broker"]))].append(r)
    paths = []
    for (day, hour, broker), rows in sorted(buckets.items()):
        first = min(_when(r) for r in rows)
        epoch = int(datetime.fromisoformat(first.replace("Z", "+00:00")).timestamp())
        directory = root / tree / f"date={day}" / f"hour={hour}"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{broker}-{epoch}-{seq}.jsonl"
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
        tmp.replace(path)
        paths.append(path)
    return paths


def write_control_exports(
    root: Path, day: str, prices: list[Record], groups: list[Record] | None = None
) -> None:
    """What ``manage.py export_analytics_inputs`` writes: prices and group SLOs for ``day``."""
    for tree, rows in (("prices", prices), ("groups", groups or [])):
        directory = root / tree / f"date={day}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{tree}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def synthetic_usage(
    day: str,
    tenants: int,
    brokers: int,
    minutes: int,
    topics_per_tenant: int = 3,
    seed: int = 7,
    replay_every: int = 50,
) -> Iterator[Record]:
    """A day of usage and storage records: every broker x tenant pair for ``minutes`` minutes,
    hourly storage samples per topic, and every ``replay_every``-th usage record written twice
    (the later copy with other counters: the one that must win)."""
    rng = random.Random(seed)
    start = datetime.fromisoformat(day).replace(tzinfo=UTC)
    step = max(1, 1440 // max(1, minutes))
    n = 0
    for b in range(brokers):
        broker = f"broker-{b}"
        for t in range(tenants):
            tenant = f"tenant-{t:04d}"
            for i in range(minutes):
                minute = start + timedelta(minutes=(i * step) % 1440)
                written = minute + timedelta(seconds=61)
                m_in, m_out = rng.randint(0, 500), rng.randint(0, 800)
                size = rng.choice((100, 1000, 5000, 9000))
                units = -(-size // 4096)
                yield usage_record(
                    broker, tenant, minute, m_in, m_in * size, m_out, m_out * size,
                    m_in * units, m_out * units, written,
                    {"SendMessage": m_in, "ReceiveMessage": rng.randint(0, 50)},
                )  # fmt: skip
                n += 1
                if replay_every and n % replay_every == 0:
                    yield usage_record(
                        broker, tenant, minute, m_in + 1, (m_in + 1) * size, m_out, m_out * size,
                        (m_in + 1) * units, m_out * units, written + timedelta(minutes=5),
                    )  # fmt: skip
            for topic in range(topics_per_tenant):
                for hour in range(24):
                    ts = start + timedelta(hours=hour, minutes=rng.randint(0, 59))
                    yield storage_record(
                        broker, tenant, f"topic-{topic}", ts, rng.randint(0, 5 * 1024**3), ts
                    )
