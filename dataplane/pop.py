"""POP delivery state: per (group, topic, queue) the pop cursor and the in-flight messages.

A message popped for a group is *in flight* until acked; it is invisible to the group until
``invisible_until_ms``, after which the next receive delivers it again with ``attempt + 1``. Each
delivery gets a fresh nonce that goes into the receipt handle; only the current nonce is accepted,
so handles from earlier deliveries (or from before a ChangeInvisibleDuration) are stale.

Durability: every change is appended to ``{data_dir}/pop/journal.log`` (one JSON object per line)
and the whole state is periodically compacted into ``snapshot.json`` (atomic rename). Startup loads
the snapshot and replays the journal; a torn last line is ignored. The group's committed offset
(lowest offset not yet acked) is also written to the store's consumer offsets.

Compaction keeps the event loop out of the snapshot's serialization and fsync (tens of ms with
tens of thousands of messages in flight, every few seconds under load): the loop exports the state
and renames ``journal.log`` to ``journal.<n>.log``, where changes made before that export are, and
goes on in a new ``journal.log``; a thread serializes (:func:`serialized_item`, a few thousand
entries at a time, the loop running in between) and writes the snapshot, which records that it
covers the rotated journals below ``n + 1`` (``"journal"`` in its ``cl`` item), then deletes them.
A restart replays the rotated journals the snapshot does not cover, in order, then
``journal.log``: a crash before the snapshot's rename finds the older snapshot and the rotated
journal, one after it the new snapshot, which skips it.

Only the positions changed since the last snapshot's export (every change is journaled, and each
journaling marks its position) are exported and serialized again; the others are written as the
bytes they were written as last time, which the state keeps (the snapshot's size in memory). A
group holding many messages in flight and doing nothing costs a compaction nothing but the write:
serialized each time, the 100,000 a group holds in the full broker_bench run doubled that run's e2e
p99 (docs/benchmarks.md, "POP compactions of a large state"). The next compaction starts once the
journal holds ``compact_after`` records, or as many as the last snapshot had entries when that is
more (a restart replays at most that many; as Redis rewrites its AOF once it has doubled).

FIFO groups also keep, per queue, the message group of each in-flight offset (``groups``) and the
*held* offsets: messages the cursor has passed while their message group had a message in flight;
they are delivered, oldest first, once that group is free. Both are journaled like the rest.

Replication (HA, ``dataplane/pop_replication.py``): with a ``sink`` set, the journal lines of every
change (one RPC's batch at a time) are also handed to it, and the master writes them into the
CommitLog; a replica applies them with :meth:`apply_replicated`. ``cl_next`` is the next record of
that CommitLog topic not yet reflected here (persisted in the snapshot and as ``cl`` records).

All methods run on the asyncio loop thread; there is no locking.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import heapq
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

import orjson

from dataplane.store.checkpoint import atomic_write, fsync_dir

try:  # the garbage collector's walks skip the in-flight tables (see untrack in _v2_codec.c)
    from dataplane import _v2_codec  # type: ignore[attr-defined]

    untrack: Callable[[list[Any] | tuple[Any, ...]], bool] = _v2_codec.untrack
except ImportError:  # pragma: no cover - no compiler where the broker was built

    def untrack(container: list[Any] | tuple[Any, ...]) -> bool:
        return False


__all__ = ("ATTEMPT", "NONCE", "OFFSET", "UNTIL", "WAITING", "InFlight", "PopState", "QueuePosition")

logger = logging.getLogger(__name__)

Key = tuple[str, str, int]  # (group, topic, queue_id)


# An in-flight message: (offset, nonce, attempt, invisible_until_ms, waiting), read with the indexes
# below. ``waiting``: waiting out the group's retry backoff after its invisible time ran out (or
# after a ChangeInvisibleDuration): when this runs out the message is delivered again at once.
# A plain tuple, not an object of a class: the garbage collector stops tracking a tuple of ints and
# strings, so a group's unacked messages add nothing to its full collections. As objects, 100,000
# of them made every full collection of the broker ~9 ms longer, a pause on its event loop
# (docs/benchmarks.md, "Pauses on the event loop").
InFlight = tuple[int, str, int, int, bool]
OFFSET: Final = 0
NONCE: Final = 1
ATTEMPT: Final = 2
UNTIL: Final = 3
WAITING: Final = 4


@dataclasses.dataclass(slots=True)
class QueuePosition:
    next_offset: int
    in_flight: dict[int, InFlight] = dataclasses.field(default_factory=dict)
    # FIFO groups only: message group of in-flight and held offsets; held = passed, not delivered.
    groups: dict[int, str] = dataclasses.field(default_factory=dict)
    held: set[int] = dataclasses.field(default_factory=set)
    # Every in-flight offset (and some already acked, dropped when they reach the top): committed()
    # was a min() over in_flight, twice per delivery and per ack, so O(in flight) per message.
    # in_flight changes only through put/put_all/drop/clear_in_flight, which keep this a superset.
    low: list[int] = dataclasses.field(default_factory=list, repr=False, compare=False)
    # (invisible_until_ms, offset) of every in-flight entry, and of some replaced or acked ones,
    # dropped when they reach the top: due() and next_due() were scans of in_flight, so a receive
    # cost O(messages in flight) (a group with 50k unacked messages consumed at two thirds speed).
    # An item is current while in_flight holds an entry of that offset with that invisible time.
    due_heap: list[tuple[int, int]] = dataclasses.field(default_factory=list, repr=False, compare=False)
    # in_flight, low and due_heap hold only ints and tuples of ints and strings, so none of them can
    # be part of a reference cycle: untracked, the garbage collector's full collections no longer walk
    # them (a pause on the event loop that grew with the messages in flight). in_flight (a dict) stays
    # untracked as long as only untracked entries go in, which put/put_all see to; the heaps are
    # untracked when made and only ever get ints and (int, int) tuples.

    def __post_init__(self) -> None:
        untrack(self.low)
        untrack(self.due_heap)

    def put(self, entry: InFlight) -> None:
        untrack(entry)
        in_flight = self.in_flight
        offset = entry[OFFSET]
        if offset not in in_flight:
            heapq.heappush(self.low, offset)
        in_flight[offset] = entry
        heapq.heappush(self.due_heap, (entry[UNTIL], offset))

    def put_all(self, entries: list[InFlight]) -> None:
        """:meth:`put` of each of ``entries`` (a receive's new messages of one queue)."""
        untrack(entries)
        in_flight, low, due_heap = self.in_flight, self.low, self.due_heap
        push = heapq.heappush
        for entry in entries:
            offset = entry[OFFSET]
            if offset not in in_flight:
                push(low, offset)
            in_flight[offset] = entry
            push(due_heap, (entry[UNTIL], offset))

    def drop(self, offset: int) -> None:
        self.in_flight.pop(offset, None)
        self._trim()

    def drop_many(self, offsets: list[int]) -> None:
        """:meth:`drop` of each of ``offsets`` (an ack's of one queue), the heaps looked at once."""
        forget = self.in_flight.pop
        for offset in offsets:
            forget(offset, None)
        self._trim()

    def _trim(self) -> None:
        """Rebuild a heap that holds many more items than messages in flight (they are dropped
        lazily, when they reach its top)."""
        low = self.low
        if len(low) > 2 * len(self.in_flight) + 1024:  # acks behind a long-unacked message
            self.low = list(self.in_flight)
            heapq.heapify(self.low)
            untrack(self.low)
        if len(self.due_heap) > 2 * len(self.in_flight) + 1024:  # acked before their time ran out
            self.due_heap = [(e[UNTIL], o) for o, e in self.in_flight.items()]
            heapq.heapify(self.due_heap)
            untrack(self.due_heap)

    def clear_in_flight(self) -> None:
        self.in_flight.clear()
        self.low.clear()
        self.due_heap.clear()

    def committed(self) -> int:
        in_flight = self.in_flight
        if in_flight:
            low = self.low
            while low and low[0] not in in_flight:
                heapq.heappop(low)
            if len(low) < len(in_flight):  # not a superset (changed around put/drop): rebuild
                self.low = low = list(in_flight)
                heapq.heapify(low)
                untrack(low)
            first = low[0]
        else:
            first = self.next_offset
        return min(first, min(self.held)) if self.held else first

    def busy_groups(self) -> set[str]:
        """Message groups with a message in flight (FIFO)."""
        groups = self.groups
        return {groups[o] for o in self.in_flight if o in groups} if groups else set()

    def _current(self, item: tuple[int, int]) -> InFlight | None:
        entry = self.in_flight.get(item[1])
        return entry if entry is not None and entry[UNTIL] == item[0] else None

    def due(self, now_ms: int) -> list[InFlight]:
        """In-flight entries whose invisible time ran out by ``now_ms``, by offset. They stay in
        flight (and in the heap) until redelivered or acked: O(due + stale) and not O(in flight)."""
        heap = self.due_heap
        if not heap or heap[0][0] > now_ms:  # the usual case: a receive asks each queue
            return []
        found: dict[int, InFlight] = {}
        while heap and heap[0][0] <= now_ms:
            item = heapq.heappop(heap)
            entry = self._current(item)
            if entry is not None:
                found[item[1]] = entry
        for offset, entry in found.items():
            heapq.heappush(heap, (entry[UNTIL], offset))
        return [found[o] for o in sorted(found)]

    def next_due(self) -> int | None:
        """The earliest invisible time of an in-flight entry (ms), or None with nothing in flight."""
        heap = self.due_heap
        while heap and self._current(heap[0]) is None:
            heapq.heappop(heap)
        return heap[0][0] if heap else None


# Nonces only need to differ between deliveries of one message (handles are signed, so they
# need not be unguessable): a PRNG seeded from os.urandom, no syscall per delivery.
_rng = random.Random()


@functools.lru_cache(maxsize=4096)
def _json_str(text: str) -> str:
    return json.dumps(text)


_WAITING = ',"w":1'
_ROTATED = re.compile(r"journal\.(\d+)\.log")


def new_nonce() -> str:
    return f"{_rng.getrandbits(64):016x}"


def new_nonces(count: int) -> list[str]:
    """``count`` nonces: those ``count`` calls of :func:`new_nonce` would make, in one call."""
    draw = _rng.getrandbits
    return [f"{draw(64):016x}" for _ in range(count)]


_SERIALIZED_RUN = 4096  # in-flight entries serialized between two turns of the loop


def serialized_item(item: dict[str, Any]) -> bytes:
    """``orjson.dumps(item)`` of one snapshot item, made a few thousand in-flight entries at a time
    with the interpreter's lock let go in between: orjson holds it throughout, and 100,000 messages
    in flight took the event loop's turns 5 ms at a time (the snapshot thread serializes, the loop
    runs between the runs)."""
    inflight = item.get("inflight")
    if inflight is None or len(inflight) <= _SERIALIZED_RUN:
        return orjson.dumps(item)
    marker = b'"inflight":[]'
    head, tail = orjson.dumps({**item, "inflight": []}).split(marker, 1)
    runs = []
    for at in range(0, len(inflight), _SERIALIZED_RUN):
        runs.append(orjson.dumps(inflight[at : at + _SERIALIZED_RUN])[1:-1])
        time.sleep(0)
    return b"".join((head, b'"inflight":[', b",".join(runs), b"]", tail))


# A position in a snapshot: its part as written before, or its item to serialize.
_Part = tuple[Key, QueuePosition, bytes | dict[str, Any]]


def _item(key: Key, pos: QueuePosition) -> dict[str, Any]:
    """The snapshot item of one position (JSON-ready: :meth:`PopState.export`'s format)."""
    g, t, q = key
    item: dict[str, Any] = {
        "g": g,
        "t": t,
        "q": q,
        "next": pos.next_offset,
        # the entries as they are, [offset, nonce, attempt, until, waiting]: a copy of the table's
        # values, not a list built per entry (restore reads a missing waiting as false)
        "inflight": list(pos.in_flight.values()),
    }
    untrack(item["inflight"])  # walked by no collection while the snapshot is written
    if pos.groups:
        item["groups"] = [[o, mg] for o, mg in pos.groups.items()]
        item["held"] = sorted(pos.held)
    return item


class PopState:
    """In-flight table of every group; see the module docstring for durability."""

    def __init__(
        self,
        data_dir: Path,
        *,
        initial_offset: Callable[[str, str, int], int],
        on_commit: Callable[[str, str, int, int], None],
        sync: bool = False,
        compact_after: int = 50_000,
    ) -> None:
        self._dir = data_dir / "pop"
        self._dir.mkdir(parents=True, exist_ok=True)
        self._initial_offset = initial_offset
        self._on_commit = on_commit
        self._sync = sync
        self._compact_after = compact_after
        # The journal's length that starts the next compaction (see the module docstring): a
        # snapshot writes the whole state, so it costs at most one entry written per journal record.
        self._compact_at = compact_after
        self._positions: dict[Key, QueuePosition] = {}
        # the positions of each (group, topic): next_due_ms looks at a group's queues, not all
        self._by_topic: dict[tuple[str, str], list[QueuePosition]] = {}
        # when a (group, topic) was last received from (monotonic s; not persisted: a restart
        # counts as a use), for dropping the positions of broadcast members gone for good
        self._used: dict[tuple[str, str], float] = {}
        self._journal_records = 0
        self._batch_depth = 0
        self._dirty = False
        self.cl_next = 0
        self.sink: Callable[[list[str]], None] | None = None
        self._outbox: list[str] = []
        # the number the next rotated journal gets, and the thread writing a snapshot (if any)
        self._next_rotation = 0
        self._compaction: threading.Thread | None = None
        # Each position's part of the last snapshot, with the position it was made of, and the
        # positions changed since that snapshot's export (module docstring). The snapshot thread
        # leaves the parts of its snapshot in _parts_written; the loop takes them when it joins that
        # thread, or, when the thread did not get that far, marks the positions that export found
        # changed once more (their changes are in no part kept).
        self._parts: dict[Key, tuple[QueuePosition, bytes]] = {}
        self._parts_written: dict[Key, tuple[QueuePosition, bytes]] | None = None
        self._changed: set[Key] = set()
        self._exported_changes: set[Key] | None = None
        self._load()
        self._journal = open(self._dir / "journal.log", "a")  # noqa: SIM115 - closed in close()

    # Persistence

    def _load(self) -> None:
        snapshot = self._dir / "snapshot.json"
        first = 0  # the first rotated journal the snapshot does not cover
        if snapshot.exists():
            items = json.loads(snapshot.read_bytes())  # UTF-8 (orjson), whatever the locale
            self.restore(items)
            first = max((int(item.get("journal", 0)) for item in items if "cl" in item), default=0)
        rotated = self._rotated()
        for number, path in rotated:
            if number < first:  # in the snapshot already: its deletion was cut short
                path.unlink(missing_ok=True)
            else:
                self._replay(path)
        self._next_rotation = max([first] + [number + 1 for number, _ in rotated])
        journal = self._dir / "journal.log"
        if journal.exists():
            self._replay(journal)

    def _rotated(self) -> list[tuple[int, Path]]:
        """The rotated journals (``journal.<n>.log``), oldest first."""
        found = []
        for path in self._dir.glob("journal.*.log"):
            match = _ROTATED.fullmatch(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def _replay(self, journal: Path) -> None:
        with open(journal) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    logger.warning("pop journal %s: ignoring a torn record at the end", journal.name)
                    break
                self._apply(record)
                self._journal_records += 1

    def _apply(self, r: dict[str, Any]) -> None:
        if r["op"] == "cl":
            self.cl_next = int(r["next"])
            return
        key = (r["g"], r["t"], r["q"])
        self._changed.add(key)
        op = r["op"]
        if op == "forget":
            self._remove(key)
            return
        pos = self._positions.get(key)
        if pos is None:
            pos = self._add(key, QueuePosition(r.get("next", 0)))
        if op == "pop":
            pos.put((r["o"], r["n"], r["a"], r["u"], bool(r.get("w"))))
            pos.next_offset = max(pos.next_offset, r["next"])
            if "mg" in r:
                pos.groups[r["o"]] = r["mg"]
                pos.held.discard(r["o"])
        elif op == "hold":
            pos.held.add(r["o"])
            pos.groups[r["o"]] = r["mg"]
            pos.next_offset = max(pos.next_offset, r["next"])
        elif op == "adv":
            pos.next_offset = max(pos.next_offset, r["next"])
        elif op == "ack":
            pos.drop(r["o"])
            if pos.groups:
                pos.groups.pop(r["o"], None)
                pos.held.discard(r["o"])
        elif op == "reset":
            pos.clear_in_flight()
            pos.groups.clear()
            pos.held.clear()
            pos.next_offset = r["next"]

    def _write(self, record: dict[str, Any]) -> None:
        self._apply(record)
        self._append_line(json.dumps(record, separators=(",", ":")) + "\n")

    def _append_line(self, line: str, replicate: bool = True) -> None:
        self._journal.write(line)
        if replicate and self.sink is not None:
            self._outbox.append(line)
        self._appended(1)

    def _append_lines(self, lines: list[str]) -> None:
        """:meth:`_append_line` for each of ``lines``, with one write."""
        self._journal.write("".join(lines))
        if self.sink is not None:
            self._outbox.extend(lines)
        self._appended(len(lines))

    def _appended(self, records: int) -> None:
        self._journal_records += records
        if self._batch_depth:
            self._dirty = True
        else:
            self._flush_journal()
        if self._journal_records >= self._compact_at and not self._compacting():
            self.compact_in_background()

    def _flush_journal(self) -> None:
        self._dirty = False
        self._journal.flush()
        if self._sync:
            os.fsync(self._journal.fileno())
        if self._outbox:
            lines, self._outbox = self._outbox, []
            if self.sink is not None:
                self.sink(lines)

    def apply_replicated(self, body: bytes, cl_next: int) -> None:
        """Apply the journal lines of one replicated CommitLog record (not handed to the sink) and
        remember that records below ``cl_next`` are applied."""
        with self.batch():
            for line in body.decode().splitlines():
                if not line:
                    continue
                record = json.loads(line)
                if record.get("op") == "cl":
                    continue
                self._apply(record)
                self._append_line(line + "\n", replicate=False)
            self._apply({"op": "cl", "next": cl_next})
            self._append_line(f'{{"op":"cl","next":{int(cl_next)}}}\n', replicate=False)

    def clear(self, cl_next: int) -> None:
        """Forget every position (a replica about to rebuild its state from the CommitLog)."""
        self._positions.clear()
        self._by_topic.clear()
        self._used.clear()
        self._outbox.clear()
        self.wait_compacted()
        self._parts.clear()
        self._changed.clear()
        self.cl_next = cl_next
        self.compact()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Changes inside reach the journal with one write (and one fsync when sync) at the end.

        Use around the changes of one RPC, and answer the client only after the block.
        """
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if not self._batch_depth and self._dirty:
                self._flush_journal()

    def restore(self, items: list[dict[str, Any]]) -> None:
        """Add the positions of a snapshot (:meth:`export`) to this state."""
        for item in items:
            if "cl" in item:
                self.cl_next = int(item["cl"])
                continue
            pos = QueuePosition(item["next"])
            for e in item["inflight"]:
                pos.put((e[0], e[1], e[2], e[3], len(e) > 4 and bool(e[4])))
            for offset, message_group in item.get("groups", ()):
                pos.groups[offset] = message_group
            pos.held.update(item.get("held", ()))
            self._add((item["g"], item["t"], item["q"]), pos)

    def in_flight_count(self) -> int:
        return sum(len(pos.in_flight) + len(pos.held) for pos in self._positions.values())

    def export(self) -> list[dict[str, Any]]:
        """The whole state as JSON-ready items (the snapshot format), ``cl_next`` last."""
        items = [_item(key, pos) for key, pos in self._positions.items()]
        items.append({"cl": self.cl_next})
        return items

    def _snapshot_parts(self) -> list[_Part]:
        """The positions for a snapshot: a position unchanged since the last snapshot's export as the
        part written for it then, any other as its item to serialize (a copy: the thread serializes
        it while the loop goes on changing the position)."""
        changed, self._changed = self._changed, set()
        self._exported_changes = changed
        parts: list[_Part] = []
        for key, pos in self._positions.items():
            written = self._parts.get(key)
            if written is not None and written[0] is pos and key not in changed:
                parts.append((key, pos, written[1]))
            else:
                parts.append((key, pos, _item(key, pos)))
        return parts

    def compact(self) -> None:
        """Write the whole state as a snapshot and start an empty journal, before returning."""
        self._compact(background=False)

    def compact_in_background(self) -> None:
        """:meth:`compact`, the snapshot written by a thread of its own (what the journal's growth
        starts); :meth:`wait_compacted` waits for it."""
        self._compact(background=True)

    def _compact(self, background: bool) -> None:
        """Export the state and rotate the journal here (the loop); write the snapshot here or, with
        ``background``, in a thread of its own (see the module docstring)."""
        self.wait_compacted()
        parts = self._snapshot_parts()
        self._compact_at = max(self._compact_after, self.in_flight_count())
        number = self._next_rotation
        self._next_rotation += 1
        last = {"cl": self.cl_next, "journal": number + 1}  # the journals the snapshot covers
        self._journal.flush()
        if self._sync:  # the lines of the RPC under way may be in it: durable before it answers
            os.fsync(self._journal.fileno())
        self._journal.close()
        (self._dir / "journal.log").replace(self._dir / f"journal.{number}.log")
        # "w", a new file: writes without O_APPEND, which costs every write a little (as before)
        self._journal = open(self._dir / "journal.log", "w")  # noqa: SIM115 - closed in close()
        if self._sync:
            fsync_dir(self._dir)
        self._journal_records = 0
        if not background:
            self._write_snapshot(parts, last, number)
            self.wait_compacted()  # (takes the parts in)
            return
        # the export's lists are its own: the thread serializes them while the loop goes on
        self._compaction = threading.Thread(
            target=self._write_snapshot, args=(parts, last, number), name="PopSnapshot", daemon=True
        )
        self._compaction.start()

    def _write_snapshot(self, parts: list[_Part], last: dict[str, Any], rotated: int) -> None:
        """Write ``parts`` and ``last`` as the snapshot, then delete the journals up to ``rotated`` it
        covers; the parts as written are left for the next snapshot (:attr:`_parts_written`)."""
        time.sleep(0)  # the thread's start: the caller (the loop) goes on first
        written: dict[Key, tuple[QueuePosition, bytes]] = {}
        pieces = [b"["]
        for key, pos, part in parts:
            if not isinstance(part, bytes):
                part = serialized_item(part)
                time.sleep(0)
            written[key] = (pos, part)
            pieces += (part, b",")
        pieces += (orjson.dumps(last), b"]")
        data = b"".join(pieces)  # one copy of the whole (a large state's is several MB)
        self._parts_written = written
        try:
            # the rename is on disk (atomic_write fsyncs the directory) before the journals it replaces go
            atomic_write(self._dir / "snapshot.json", data)
            for number, path in self._rotated():
                if number <= rotated:
                    path.unlink(missing_ok=True)
        except OSError:
            # the rotated journal stays and a restart replays it; the next compaction covers it
            logger.exception("pop snapshot not written; the journal is kept")

    def _compacting(self) -> bool:
        return self._compaction is not None and self._compaction.is_alive()

    def wait_compacted(self) -> None:
        """Return once a snapshot being written in the background is written."""
        if self._compaction is not None:
            self._compaction.join()
            self._compaction = None
        if self._exported_changes is not None:
            if self._parts_written is not None:  # the parts as of that export
                self._parts = self._parts_written
            else:  # not serialized: what that export found changed is not in self._parts
                self._changed |= self._exported_changes
            self._parts_written = self._exported_changes = None

    def close(self) -> None:
        if self._journal.closed:  # closed already (a stop after a failed start closes twice)
            return
        self.compact()
        self._journal.close()

    # Queries

    def _add(self, key: Key, pos: QueuePosition) -> QueuePosition:
        old = self._positions.get(key)
        siblings = self._by_topic.setdefault((key[0], key[1]), [])
        if old is not None:
            siblings.remove(old)
        self._positions[key] = pos
        siblings.append(pos)
        return pos

    def _remove(self, key: Key) -> None:
        pos = self._positions.pop(key, None)
        if pos is None:
            return
        siblings = self._by_topic[(key[0], key[1])]
        siblings.remove(pos)
        if not siblings:
            del self._by_topic[(key[0], key[1])]
            self._used.pop((key[0], key[1]), None)

    def position_keys(self) -> list[Key]:
        return list(self._positions)

    def touch(self, group: str, topic: str) -> None:
        """``group`` received from ``topic`` now (see :meth:`idle`)."""
        self._used[(group, topic)] = time.monotonic()

    def idle(self, wanted: Callable[[str], bool], for_s: float) -> list[tuple[str, str]]:
        """(group, topic) pairs of the groups ``wanted`` picks with no :meth:`touch` for ``for_s``
        seconds; a pair never touched since this process started counts from its first look here."""
        now = time.monotonic()
        used = self._used
        return [gt for gt in self._by_topic if wanted(gt[0]) and now - used.setdefault(gt, now) >= for_s]

    def forget(self, keys: Iterable[Key]) -> int:
        """Drop the positions ``keys`` with what they hold in flight (a deleted group or topic, a
        broadcast member gone for good): journaled and replicated as every change. Returns how many."""
        dropped = 0
        with self.batch():
            for group, topic, queue_id in list(keys):
                if (group, topic, queue_id) in self._positions:
                    self._write({"op": "forget", "g": group, "t": topic, "q": queue_id})
                    dropped += 1
        return dropped

    def position(self, group: str, topic: str, queue_id: int) -> QueuePosition:
        key = (group, topic, queue_id)
        pos = self._positions.get(key)
        if pos is None:
            pos = self._add(key, QueuePosition(self._initial_offset(group, topic, queue_id)))
        return pos

    def positions(self) -> dict[Key, QueuePosition]:
        """Every position by (group, topic, queue id): the live table, to be read, not changed (the
        compiled ack check looks entries up in it)."""
        return self._positions

    def peek(self, group: str, topic: str, queue_id: int) -> QueuePosition | None:
        return self._positions.get((group, topic, queue_id))

    def items(self) -> Iterator[tuple[Key, QueuePosition]]:
        return iter(list(self._positions.items()))

    def next_due_ms(self, group: str, topic: str) -> int | None:
        """The earliest invisible time (ms) of the group's in-flight messages of ``topic``."""
        due = [d for pos in self._by_topic.get((group, topic), ()) if (d := pos.next_due()) is not None]
        return min(due, default=None)

    # Changes

    def _commit(self, group: str, topic: str, queue_id: int, before: int) -> None:
        after = self._positions[(group, topic, queue_id)].committed()
        if after != before:
            self._on_commit(group, topic, queue_id, after)

    def deliver(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        attempt: int,
        until_ms: int,
        next_offset: int,
        message_group: str | None = None,
        *,
        waiting: bool = False,
        nonce: str | None = None,
    ) -> InFlight:
        """Record a (re)delivery of ``offset``; returns the entry with its new nonce.

        ``message_group`` (FIFO groups, first delivery) is remembered until the ack; redeliveries
        keep it without passing it again. ``waiting`` marks a retry backoff (see InFlight);
        ``nonce`` keeps the current one (the handle stays valid while the backoff runs).
        """
        pos = self.position(group, topic, queue_id)
        self._changed.add((group, topic, queue_id))
        before = pos.committed()
        nonce = nonce or new_nonce()
        following = max(next_offset, pos.next_offset)
        # The hot path: the same record as _write({"op": "pop", ...}) would journal and apply.
        entry = (offset, nonce, attempt, until_ms, waiting)
        pos.put(entry)
        pos.next_offset = following
        mg = ""
        if message_group is not None:
            pos.groups[offset] = message_group
            pos.held.discard(offset)
            mg = f',"mg":{json.dumps(message_group)}'
        self._append_line(
            f'{{"op":"pop","g":{_json_str(group)},"t":{_json_str(topic)},"q":{int(queue_id)},'
            f'"o":{int(offset)},"n":"{nonce}","a":{int(attempt)},"u":{int(until_ms)},'
            f'"next":{int(following)}{mg}{_WAITING if waiting else ""}}}\n'
        )
        self._commit(group, topic, queue_id, before)
        return entry

    def extend(self, group: str, topic: str, queue_id: int, entry: InFlight, until_ms: int) -> InFlight:
        """The same delivery of in-flight ``entry``, invisible until ``until_ms`` instead: its attempt,
        nonce (so the handles given for it stay valid) and waiting mark are kept."""
        return self.deliver(
            group,
            topic,
            queue_id,
            entry[OFFSET],
            entry[ATTEMPT],
            until_ms,
            self.position(group, topic, queue_id).next_offset,
            waiting=entry[WAITING],
            nonce=entry[NONCE],
        )

    def deliver_new(
        self, group: str, topic: str, queue_id: int, offsets: list[int], until_ms: int
    ) -> list[InFlight]:
        """First deliveries (attempt 1) of ``offsets`` of one queue, in order: what :meth:`deliver`
        with ``next_offset = offset + 1`` does for each, with the journal written once and the
        committed offset looked at once (a receive takes its new messages this way)."""
        pos = self.position(group, topic, queue_id)
        self._changed.add((group, topic, queue_id))
        before = pos.committed()
        following = pos.next_offset
        head = f'{{"op":"pop","g":{_json_str(group)},"t":{_json_str(topic)},"q":{int(queue_id)},"o":'
        tail = f',"a":1,"u":{int(until_ms)},"next":'
        nonces = new_nonces(len(offsets))
        pairs = list(zip(offsets, nonces, strict=True))
        entries: list[InFlight] = [(offset, nonce, 1, until_ms, False) for offset, nonce in pairs]
        pos.put_all(entries)
        lines = []
        for offset, nonce in pairs:
            if offset >= following:
                following = offset + 1
            lines.append(f'{head}{int(offset)},"n":"{nonce}"{tail}{following}}}\n')
        pos.next_offset = following
        self._append_lines(lines)
        self._commit(group, topic, queue_id, before)
        return entries

    def hold(
        self, group: str, topic: str, queue_id: int, offset: int, message_group: str, next_offset: int
    ) -> None:
        """FIFO: the cursor passes ``offset`` without delivering it (its message group is busy)."""
        pos = self.position(group, topic, queue_id)
        before = pos.committed()
        self._write(
            {
                "op": "hold",
                "g": group,
                "t": topic,
                "q": queue_id,
                "o": offset,
                "mg": message_group,
                "next": next_offset,
            }
        )
        self._commit(group, topic, queue_id, before)

    def advance(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        pos = self.position(group, topic, queue_id)
        if next_offset > pos.next_offset:
            before = pos.committed()
            self._write({"op": "adv", "g": group, "t": topic, "q": queue_id, "next": next_offset})
            self._commit(group, topic, queue_id, before)

    def lookup(self, group: str, topic: str, queue_id: int, offset: int, nonce: str) -> InFlight | None:
        pos = self._positions.get((group, topic, queue_id))
        entry = pos.in_flight.get(offset) if pos else None
        return entry if entry is not None and entry[NONCE] == nonce else None

    def ack(self, group: str, topic: str, queue_id: int, offset: int) -> bool:
        """Forget ``offset``; True when the queue holds FIFO messages that may now be deliverable."""
        return self.ack_many(group, topic, queue_id, [offset])

    def ack_many(self, group: str, topic: str, queue_id: int, offsets: list[int]) -> bool:
        """:meth:`ack` of each of ``offsets`` (one queue), with one journal write and one look at
        the committed offset; True when the queue holds FIFO messages that may now be deliverable."""
        pos = self.position(group, topic, queue_id)
        self._changed.add((group, topic, queue_id))
        before = pos.committed()
        pos.drop_many(offsets)  # as _apply({"op": "ack", ...}) does for each
        groups, held = pos.groups, pos.held
        if groups:
            for offset in offsets:
                groups.pop(offset, None)
                held.discard(offset)
        head = f'{{"op":"ack","g":{_json_str(group)},"t":{_json_str(topic)},"q":{int(queue_id)},"o":'
        self._append_lines([f"{head}{int(offset)}}}\n" for offset in offsets])
        self._commit(group, topic, queue_id, before)
        return bool(held)

    def reset(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        """Move the cursor (UpdateOffset); in-flight messages of that queue are dropped."""
        pos = self.position(group, topic, queue_id)
        before = pos.committed()
        self._write({"op": "reset", "g": group, "t": topic, "q": queue_id, "next": next_offset})
        self._commit(group, topic, queue_id, before)
