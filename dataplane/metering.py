"""Usage records and consumer-lag samples, written as docs/metering.md specifies.

Counters are kept per (tenant, UTC minute) and are cumulative: whenever a minute changed, the next
flush writes its *whole* total again under the same deterministic id, and readers keep the record
with the largest ``written_at``. So a minute may be written several times (while it is open, at
shutdown, after a restart) and still counts once. The totals of recent minutes are persisted in
``{data_dir}/metering-state.json`` *before* the files are written, so a restarted broker continues
a minute from what it already wrote instead of writing a smaller total with a later timestamp.
A broker killed with SIGKILL loses what it counted since its last flush (``metering_flush_s``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ("LagSample", "UsageMeter", "metering_root", "requests_4k")

logger = logging.getLogger(__name__)

STATE_FILE = "metering-state.json"
_KEEP_MINUTES = 15  # minutes kept in memory/state after they were written


def requests_4k(size: int) -> int:
    """A message counted in 4 KiB request units: ceil(size / 4096), at least 1."""
    return max(1, -(-size // 4096))


def metering_root(setting: str, data_dir: Path) -> Path:
    """The metering root: ``file://`` URLs and paths; default ``{data_dir}/../metering``."""
    if not setting:
        return data_dir.resolve().parent / "metering"
    if setting.startswith("file://"):
        return Path(setting[len("file://") :])
    if "://" in setting:
        raise ValueError(f"metering_dir {setting!r}: only local directories and file:// URLs are supported")
    return Path(setting)


def _minute_str(minute_s: int) -> str:
    return datetime.fromtimestamp(minute_s, UTC).strftime("%Y-%m-%dT%H:%M:00Z")


def _ts_str(ts_s: int) -> str:
    return datetime.fromtimestamp(ts_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _record_id(*parts: object) -> str:
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()


@dataclasses.dataclass(slots=True)
class _Counters:
    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    requests_in_4k: int = 0
    requests_out_4k: int = 0
    api_calls: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True, frozen=True)
class LagSample:
    tenant: str
    group: str  # qualified (ns%group): the id must not collide across tenants
    topic: str  # qualified
    queue_id: int
    lag_messages: int
    lag_ms: int
    inflight: int
    committed_offset: int
    max_offset: int


class UsageMeter:
    def __init__(
        self, root: Path, broker: str, state_dir: Path, clock: Callable[[], float] = time.time
    ) -> None:
        self.root = root
        self.broker = broker
        self._state_path = state_dir / STATE_FILE
        self._clock = clock
        self._minutes: dict[tuple[str, int], _Counters] = {}
        self._dirty: set[tuple[str, int]] = set()
        self._extra: list[tuple[str, int, dict[str, Any]]] = []  # (tree, epoch s, record)
        self._seq = 0
        self._last_written = 0.0
        self._load()

    # Counting (loop thread)

    def _current(self, tenant: str) -> _Counters:
        key = (tenant, int(self._clock()) // 60 * 60)
        counters = self._minutes.get(key)
        if counters is None:
            counters = self._minutes[key] = _Counters()
        self._dirty.add(key)
        return counters

    def count_in(self, tenant: str, sizes: Iterable[int]) -> None:
        if not tenant:
            return
        c = self._current(tenant)
        for size in sizes:
            c.messages_in += 1
            c.bytes_in += size
            c.requests_in_4k += requests_4k(size)

    def count_out(self, tenant: str, sizes: Iterable[int]) -> None:
        if not tenant:
            return
        c = self._current(tenant)
        for size in sizes:
            c.messages_out += 1
            c.bytes_out += size
            c.requests_out_4k += requests_4k(size)

    def count_call(self, tenant: str, rpc: str) -> None:
        if not tenant:
            return
        calls = self._current(tenant).api_calls
        calls[rpc] = calls.get(rpc, 0) + 1

    def add_storage(self, samples: Iterable[tuple[str, str, int]]) -> None:
        """(tenant, tenant-relative topic, bytes) sampled now."""
        now = int(self._clock())
        ts = _ts_str(now)
        for tenant, topic, size in samples:
            record = {
                "id": _record_id("storage", self.broker, tenant, topic, ts),
                "kind": "storage",
                "broker": self.broker,
                "tenant": tenant,
                "topic": topic,
                "ts": ts,
                "bytes": size,
            }
            self._extra.append(("usage", now, record))

    def add_lag(self, samples: Iterable[LagSample]) -> None:
        now = int(self._clock())
        ts = _ts_str(now)
        for s in samples:
            record = {
                "id": _record_id("lag", self.broker, s.group, s.topic, s.queue_id, ts),
                "kind": "lag",
                "broker": self.broker,
                "tenant": s.tenant,
                "ts": ts,
                "group": s.group.partition("%")[2] or s.group,
                "topic": s.topic.partition("%")[2] or s.topic,
                "queue_id": s.queue_id,
                "lag_messages": s.lag_messages,
                "lag_ms": s.lag_ms,
                "inflight": s.inflight,
                "committed_offset": s.committed_offset,
                "max_offset": s.max_offset,
            }
            self._extra.append(("lag", now, record))

    # Writing

    def snapshot(self) -> tuple[list[tuple[str, int, dict[str, Any]]], dict[str, Any]]:
        """Take what must be written (loop thread); returns (records, state). Clears the buffers."""
        records = [("usage", minute, self._usage_record(tenant, minute)) for tenant, minute in self._dirty]
        self._dirty.clear()
        records.extend(self._extra)
        self._extra = []
        cutoff = int(self._clock()) // 60 * 60 - _KEEP_MINUTES * 60
        for key in [k for k in self._minutes if k[1] < cutoff]:
            del self._minutes[key]
        state = {
            "version": 1,
            "seq": self._seq,
            "minutes": [
                {"tenant": t, "minute": m, **dataclasses.asdict(c)} for (t, m), c in self._minutes.items()
            ],
        }
        return records, state

    def _usage_record(self, tenant: str, minute: int) -> dict[str, Any]:
        c = self._minutes[(tenant, minute)]
        text = _minute_str(minute)
        return {
            "id": _record_id("usage", self.broker, tenant, text),
            "kind": "usage",
            "minute": text,
            "broker": self.broker,
            "tenant": tenant,
            "messages_in": c.messages_in,
            "bytes_in": c.bytes_in,
            "messages_out": c.messages_out,
            "bytes_out": c.bytes_out,
            "requests_in_4k": c.requests_in_4k,
            "requests_out_4k": c.requests_out_4k,
            "api_calls": dict(sorted(c.api_calls.items())),
        }

    def write(self, records: list[tuple[str, int, dict[str, Any]]], state: dict[str, Any]) -> list[Path]:
        """Persist ``state`` then write ``records`` as one file per (tree, hour). Any thread."""
        if not records:
            return []
        groups: dict[tuple[str, int], list[tuple[int, dict[str, Any]]]] = {}
        for tree, epoch, record in records:
            groups.setdefault((tree, epoch // 3600), []).append((epoch, record))
        state["seq"] = self._seq + len(groups)
        _write_atomic(self._state_path, json.dumps(state, sort_keys=True).encode())
        written_at = self._written_at()
        paths = []
        for (tree, hour), items in sorted(groups.items()):
            self._seq += 1
            first = min(epoch for epoch, _ in items)
            day = datetime.fromtimestamp(hour * 3600, UTC)
            directory = self.root / tree / f"date={day:%Y-%m-%d}" / f"hour={day:%H}"
            path = directory / f"{self.broker}-{first}-{self._seq}.jsonl"
            lines = [json.dumps({**record, "written_at": written_at}, sort_keys=False) for _, record in items]
            _write_atomic(path, ("\n".join(lines) + "\n").encode())
            paths.append(path)
        return paths

    def requeue(self, records: list[tuple[str, int, dict[str, Any]]]) -> None:
        """Take back records whose write failed (loop thread)."""
        for tree, epoch, record in records:
            if record["kind"] == "usage":
                key = (record["tenant"], epoch)
                if key in self._minutes:
                    self._dirty.add(key)
            else:
                self._extra.append((tree, epoch, record))

    def flush(self) -> list[Path]:
        records, state = self.snapshot()
        return self.write(records, state)

    def _written_at(self) -> str:
        # Strictly increasing within a broker: a rewrite of a minute must win over the earlier one.
        now = max(self._clock(), self._last_written + 1e-6)
        self._last_written = now
        return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def _load(self) -> None:
        if not self._state_path.exists():
            return
        try:
            state = json.loads(self._state_path.read_text())
        except (OSError, ValueError):
            logger.exception("metering state %s unreadable; starting from zero", self._state_path)
            return
        self._seq = int(state.get("seq", 0))
        for item in state.get("minutes", []):
            key = (str(item.pop("tenant")), int(item.pop("minute")))
            self._minutes[key] = _Counters(**item)
            self._dirty.add(key)  # rewritten once: a crash may have come between state and file


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
