"""Usage records and consumer-lag samples, written as docs/metering.md specifies.

Counters are kept per (tenant, UTC minute) and are cumulative: whenever a minute changed, the next
flush writes its *whole* total again under the same deterministic id, and readers keep the record
with the largest ``written_at``. So a minute may be written several times (while it is open, at
shutdown, after a restart) and still counts once.

Crash safety has three parts, all under the broker's data dir:

- ``metering-journal/{n:012d}.log``: every count and every sample is appended (one ``write()``)
  before the call that caused it is answered, so a SIGKILL loses nothing a client saw acknowledged.
  The journal is fsynced every ``JOURNAL_SYNC_S`` (an OS crash loses at most that much, the window
  the CommitLog has under ASYNC_FLUSH). Lines carry a CRC; a torn tail is dropped on recovery.
- ``metering-state.json``: the checkpoint. A flush rotates the journal, then persists the totals of
  recent minutes, the samples being written and the first journal segment the checkpoint does not
  cover; only then are the files written and the older segments deleted. Start-up loads the
  checkpoint and replays the journal from there.
- the outbox (``metering-outbox/``): closed hourly files, written once (temp file + rename). The
  :class:`MeteringShipper` uploads each to the object store under the same relative key and deletes
  it only once the store holds it whole; a retry after a crash PUTs the same bytes to the same key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dataplane.store.checkpoint import fsync_dir
from dataplane.store.tiered.object_store import ObjectStore, ObjectStoreSettings

__all__ = (
    "LagSample",
    "MeteringJournal",
    "MeteringShipper",
    "UsageMeter",
    "metering_root",
    "metering_store_settings",
    "requests_4k",
)

logger = logging.getLogger(__name__)

STATE_FILE = "metering-state.json"
JOURNAL_DIR = "metering-journal"
OUTBOX_DIR = "metering-outbox"
JOURNAL_SYNC_S = 0.5
_KEEP_MINUTES = 15  # minutes kept in memory/state after they were written


def requests_4k(size: int) -> int:
    """A message counted in 4 KiB request units: ceil(size / 4096), at least 1."""
    return max(1, -(-size // 4096))


def metering_root(setting: str, data_dir: Path) -> str:
    """The metering root as an object-store URL: ``file://`` (default ``{data_dir}/../metering``),
    a plain path, or ``s3://bucket/prefix`` / ``gs://`` / ``az://``."""
    if not setting:
        return f"file://{data_dir.resolve().parent / 'metering'}"
    if "://" in setting:
        return setting
    return f"file://{Path(setting).resolve()}"


def metering_store_settings(
    setting: str,
    data_dir: Path,
    *,
    endpoint: str = "",
    region: str = "",
    access_key_id: str = "",
    secret_access_key: str = "",
    timeout_s: float = 30.0,
) -> ObjectStoreSettings:
    """Where closed metering files go; S3-compatible stores use the tier's endpoint and credentials."""
    return ObjectStoreSettings(
        url=metering_root(setting, data_dir),
        endpoint=endpoint,
        region=region,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        timeout_s=timeout_s,
    )


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


# Journal


_SEGMENT = re.compile(r"^(\d{12})\.log$")


class MeteringJournal:
    """Append-only segments of JSON lines ``{crc32:08x} {payload}\\n``, one ``write()`` per entry.

    A segment is never appended to after a restart (a new one is opened), so a torn tail stays at
    the end of a finished segment. ``append`` runs on the loop thread; ``sync`` on any one thread.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.segment = -1
        self._fd = -1
        self._retired: list[int] = []
        self._lock = threading.Lock()  # fd hand-over between the loop and the syncing thread
        self._sync_lock = threading.Lock()
        self.dirty = False
        self.appended = 0  # entries since the last rotation
        self.total = 0  # entries appended by this process
        self.synced = 0  # ... of which an fsync has covered this many
        self.write_errors = 0
        self._error_logged = 0.0

    def segments(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.directory.iterdir() if (m := _SEGMENT.match(p.name)))

    def _path(self, n: int) -> Path:
        return self.directory / f"{n:012d}.log"

    def replay(self, first: int) -> Iterator[list[Any]]:
        """Entries of segments >= ``first`` in order; a corrupt or torn line ends its segment."""
        for n in self.segments():
            if n < first:
                continue
            with open(self._path(n), "rb") as f:
                for line in f:
                    if not line.endswith(b"\n"):
                        break  # a torn tail: the write never completed
                    crc, _, payload = line[:-1].partition(b" ")
                    try:
                        ok = int(crc, 16) == zlib.crc32(payload)
                        entry = json.loads(payload) if ok else None
                    except ValueError:
                        entry = None
                    if not isinstance(entry, list):
                        logger.warning(
                            "metering journal %s: corrupt line, the rest is dropped", self._path(n)
                        )
                        break
                    yield entry

    def open(self, first: int = 0) -> None:
        """Start a new segment after every existing one and not before ``first`` (the checkpoint's);
        empty ones left by earlier runs go."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for n in self.segments():
            if self._path(n).stat().st_size == 0:
                self._path(n).unlink()
        self._open(max(max(self.segments(), default=-1) + 1, first))
        fsync_dir(self.directory)

    def _open(self, n: int) -> None:
        fd = os.open(self._path(n), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        with self._lock:
            if self._fd >= 0:
                self._retired.append(self._fd)
            self._fd, self.segment = fd, n

    def append(self, entry: list[Any]) -> None:
        payload = json.dumps(entry, separators=(",", ":")).encode()
        line = b"%08x %s\n" % (zlib.crc32(payload), payload)
        try:
            written = os.write(self._fd, line)
            if written != len(line):  # a regular file takes it whole unless the disk is full
                raise OSError(f"short write ({written} of {len(line)} bytes)")
        except OSError as exc:
            # Traffic goes on: the count stays in memory and is written at the next flush.
            self.write_errors += 1
            if time.monotonic() - self._error_logged > 60:
                self._error_logged = time.monotonic()
                logger.error("metering journal %s: append failed: %s", self.directory, exc)
            return
        self.dirty = True
        self.appended += 1
        self.total += 1

    def rotate(self) -> int:
        """Open the next segment (unless nothing was appended to this one); returns the number of the
        first segment a checkpoint taken now does not cover."""
        if self.appended:
            self._open(self.segment + 1)
            self.appended = 0
        return self.segment

    def sync(self) -> None:
        """fsync what was appended; close rotated segments once they are synced."""
        with self._sync_lock:
            self.dirty = False
            with self._lock:
                retired, self._retired = self._retired, []
                fd = self._fd
                covered = self.total  # every append so far went to ``fd`` or a retired segment
            for old in retired:
                os.fsync(old)
                os.close(old)
            if fd >= 0:
                os.fsync(fd)
            self.synced = max(self.synced, covered)

    def drop_before(self, first: int) -> None:
        for n in self.segments():
            if n < first:
                self._path(n).unlink(missing_ok=True)

    def close(self) -> None:
        self.sync()
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
            self._fd = -1


# Counting and writing


class UsageMeter:
    """Counters per (tenant, minute) and samples; ``root`` is where closed files are written (the
    outbox, shipped from there); ``state_dir`` holds the checkpoint and the journal."""

    def __init__(
        self,
        root: Path,
        broker: str,
        state_dir: Path,
        clock: Callable[[], float] = time.time,
        node: str = "",
    ) -> None:
        self.root = root
        self.broker = broker
        # Who counted: nodes of one HA group share the broker name, and each counts only the calls it
        # served, so their minutes need ids and file names of their own (or a failover in the middle
        # of a minute would replace one node's total by the other's, and their keys could collide).
        self.writer = f"{broker}.{re.sub(r'[^A-Za-z0-9_.-]', '_', node)}" if node else broker
        self._state_path = state_dir / STATE_FILE
        self._clock = clock
        self._minutes: dict[tuple[str, int], _Counters] = {}
        self._dirty: set[tuple[str, int]] = set()
        self._extra: list[tuple[str, int, dict[str, Any]]] = []  # (tree, epoch s, record)
        self._seq = 0
        self._last_written = 0.0
        self._write_lock = threading.Lock()
        self.journal = MeteringJournal(state_dir / JOURNAL_DIR)
        self.recovered = 0  # journal entries replayed at start-up
        self.journal.open(self._load())

    # Counting (loop thread)

    def _current(self, tenant: str) -> tuple[_Counters, int]:
        minute = int(self._clock()) // 60 * 60
        key = (tenant, minute)
        counters = self._minutes.get(key)
        if counters is None:
            counters = self._minutes[key] = _Counters()
        self._dirty.add(key)
        return counters, minute

    def count_in(self, tenant: str, sizes: Iterable[int]) -> None:
        if not tenant:
            return
        sizes = list(sizes)
        if not sizes:
            return
        delta = (len(sizes), sum(sizes), 0, 0, sum(requests_4k(s) for s in sizes), 0)
        self._apply(tenant, delta, "")

    def count_out(self, tenant: str, sizes: Iterable[int]) -> None:
        if not tenant:
            return
        sizes = list(sizes)
        if not sizes:
            return
        delta = (0, 0, len(sizes), sum(sizes), 0, sum(requests_4k(s) for s in sizes))
        self._apply(tenant, delta, "")

    def count_call(self, tenant: str, rpc: str) -> None:
        if not tenant:
            return
        self._apply(tenant, (0, 0, 0, 0, 0, 0), rpc)

    def _apply(self, tenant: str, delta: tuple[int, int, int, int, int, int], rpc: str) -> None:
        c, minute = self._current(tenant)
        self.journal.append(["c", tenant, minute, *delta, rpc])
        _add(c, delta, rpc)

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
            self._add_extra("usage", now, record)

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
            self._add_extra("lag", now, record)

    def _add_extra(self, tree: str, epoch: int, record: dict[str, Any]) -> None:
        self.journal.append(["x", tree, epoch, record])
        self._extra.append((tree, epoch, record))

    # Writing

    def snapshot(self) -> tuple[list[tuple[str, int, dict[str, Any]]], dict[str, Any]]:
        """Take what must be written (loop thread); returns (records, state). Clears the buffers and
        rotates the journal: the state covers every entry of the segments before the new one."""
        records = [("usage", minute, self._usage_record(tenant, minute)) for tenant, minute in self._dirty]
        self._dirty.clear()
        extras = self._extra
        records.extend(extras)
        self._extra = []
        cutoff = int(self._clock()) // 60 * 60 - _KEEP_MINUTES * 60
        for key in [k for k in self._minutes if k[1] < cutoff]:
            del self._minutes[key]
        state = {
            "version": 2,
            "seq": self._seq,
            "journal": self.journal.rotate(),
            "minutes": [
                {"tenant": t, "minute": m, **dataclasses.asdict(c)} for (t, m), c in self._minutes.items()
            ],
            # samples being written: a crash before their file exists writes them again (same ids)
            "extras": [[tree, epoch, record] for tree, epoch, record in extras],
        }
        return records, state

    def _usage_record(self, tenant: str, minute: int) -> dict[str, Any]:
        c = self._minutes[(tenant, minute)]
        text = _minute_str(minute)
        return {
            "id": _record_id("usage", self.writer, tenant, text),
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
        """Persist ``state``, write ``records`` as one file per (tree, hour), then drop the journal
        segments the state covers. Any thread."""
        if not records:
            return []
        with self._write_lock:  # checkpoints go out in the order they were taken
            return self._write(records, state)

    def _write(self, records: list[tuple[str, int, dict[str, Any]]], state: dict[str, Any]) -> list[Path]:
        groups: dict[tuple[str, int], list[tuple[int, dict[str, Any]]]] = {}
        for tree, epoch, record in records:
            groups.setdefault((tree, epoch // 3600), []).append((epoch, record))
        state["seq"] = self._seq + len(groups)
        written_at = self._written_at()
        state["last_written"] = self._last_written  # a restart continues after it, whatever the clock says
        _write_atomic(self._state_path, json.dumps(state, sort_keys=True).encode())
        paths = []
        for (tree, hour), items in sorted(groups.items()):
            self._seq += 1
            first = min(epoch for epoch, _ in items)
            day = datetime.fromtimestamp(hour * 3600, UTC)
            directory = self.root / tree / f"date={day:%Y-%m-%d}" / f"hour={day:%H}"
            path = directory / f"{self.writer}-{first}-{self._seq}.jsonl"
            lines = [json.dumps({**record, "written_at": written_at}, sort_keys=False) for _, record in items]
            _write_atomic(path, ("\n".join(lines) + "\n").encode())
            paths.append(path)
        self.journal.drop_before(int(state.get("journal", 0)))
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

    def sync(self) -> None:
        """fsync the journal (any thread)."""
        self.journal.sync()

    def close(self) -> None:
        self.journal.close()

    def _written_at(self) -> str:
        # Strictly increasing within a broker: a rewrite of a minute must win over the earlier one.
        now = max(self._clock(), self._last_written + 1e-6)
        self._last_written = now
        return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def _load(self) -> int:
        """Load the checkpoint and replay the journal after it; returns the checkpoint's segment."""
        first_segment = 0
        if self._state_path.exists():
            try:
                state = json.loads(self._state_path.read_text())
            except (OSError, ValueError):
                logger.exception("metering state %s unreadable; replaying the journal", self._state_path)
                state = {}
            self._seq = int(state.get("seq", 0))
            self._last_written = float(state.get("last_written", 0.0))
            first_segment = int(state.get("journal", 0))
            for item in state.get("minutes", []):
                key = (str(item.pop("tenant")), int(item.pop("minute")))
                self._minutes[key] = _Counters(**item)
                self._dirty.add(key)  # rewritten once: a crash may have come between state and file
            for tree, epoch, record in state.get("extras", []):
                self._extra.append((str(tree), int(epoch), record))
        for entry in self.journal.replay(first_segment):
            self.recovered += 1
            if entry[0] == "c":
                tenant, minute, *delta, rpc = entry[1:]
                key = (str(tenant), int(minute))
                counters = self._minutes.get(key)
                if counters is None:
                    counters = self._minutes[key] = _Counters()
                self._dirty.add(key)
                _add(counters, tuple(int(d) for d in delta), str(rpc))
            elif entry[0] == "x":
                self._extra.append((str(entry[1]), int(entry[2]), entry[3]))
        if self.recovered:
            logger.info("metering: %d journal entries recovered since the last checkpoint", self.recovered)
        return first_segment


def _add(c: _Counters, delta: tuple[int, ...], rpc: str) -> None:
    c.messages_in += delta[0]
    c.bytes_in += delta[1]
    c.messages_out += delta[2]
    c.bytes_out += delta[3]
    c.requests_in_4k += delta[4]
    c.requests_out_4k += delta[5]
    if rpc:
        c.api_calls[rpc] = c.api_calls.get(rpc, 0) + 1


# Shipping


class MeteringShipper:
    """Uploads closed files of the outbox to the object store (same relative key) and deletes each
    local file once the store holds it whole. Re-uploading after a crash PUTs the same bytes to the
    same key, so the store never holds a file twice."""

    def __init__(self, outbox: Path, store: ObjectStore) -> None:
        self.outbox = outbox
        self.store = store
        self.shipped = 0
        self.failures = 0
        self._lock = threading.Lock()
        self.failing = False  # the last upload failed (shutdown then leaves the files for the next run)

    def pending(self) -> list[Path]:
        if not self.outbox.is_dir():
            return []
        return sorted(p for p in self.outbox.rglob("*.jsonl") if not p.name.startswith("."))

    def ship(self, deadline: float | None = None) -> int:
        """Upload what waits (oldest names first); raises the store's error after counting it.
        ``deadline`` (monotonic): stop starting uploads after it."""
        with self._lock:  # a cancelled caller's thread may still be running
            return self._ship(deadline)

    def _ship(self, deadline: float | None) -> int:
        done = 0
        for path in self.pending():
            if deadline is not None and time.monotonic() > deadline:
                break
            key = path.relative_to(self.outbox).as_posix()
            try:
                self._upload(key, path)
            except Exception:
                self.failures += 1
                self.failing = True
                raise
            self.failing = False
            path.unlink()
            _prune_empty(path.parent, self.outbox)
            done += 1
            self.shipped += 1
        return done

    def _upload(self, key: str, path: Path) -> None:
        data = path.read_bytes()
        info = self.store.put(key, data)
        if len(info.etag) == 32 and all(ch in "0123456789abcdef" for ch in info.etag):
            ok = info.etag == hashlib.md5(data, usedforsecurity=False).hexdigest()
        else:  # stores whose ETag is not an MD5 (local files): the size, read back
            ok = self.store.head(key).size == len(data)
        if not ok:
            raise OSError(f"metering upload of {key!r} did not verify; it is kept and retried")


def _prune_empty(directory: Path, stop: Path) -> None:
    while directory != stop and stop in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    fsync_dir(path.parent)
