"""POP state through the CommitLog, so a new master serves in-flight messages where the old one left
them (RocketMQ keeps POP checkpoints and acks as records of its revive topic for the same reason).

The master hands every batch of PopState journal lines (one receive, ack, renewal or offset reset)
to :meth:`PopReplicator.publish`, which appends them as one record to :data:`POP_TOPIC` queue 0::

    topic      rmq_sys_pop_state, queue 0
    body       UTF-8 JSON lines, exactly PopState's journal records
               ({"op": "pop"|"hold"|"adv"|"ack"|"reset", "g", "t", "q", ...})
    property   POP_NODE = the writing node (diagnostics)

Replication carries the record like any other; the replica's dispatch listener applies every new
record of the topic to its own PopState, in CommitLog order, and journals it locally with the
queue offset reached (``cl_next``). The CommitLog is the source of truth: a node whose CommitLog
was truncated (an old master rejoining) forgets its POP state and rebuilds it from the topic.

So that a rebuild does not replay the topic's whole history, the master also writes a snapshot of
its whole PopState to queue 1 every ``snapshot_every`` records (or every as many records as it holds
in-flight entries, if more), right after a record, when its state is exactly the fold of queue 0
up to there::

    topic      rmq_sys_pop_state, queue 1
    body       one part of zlib(JSON of PopState.export(), whose last item is {"cl": next queue-0 offset})
    properties POP_SNAPSHOT = that queue-0 offset, POP_PART = "i/n" (parts are consecutive, one put)

A rebuild loads the newest complete snapshot still in the CommitLog and applies queue 0 from its
offset; without one, it replays queue 0 from its first record.

Changes made while this node cannot write (a replica serving suggested reads, a master whose lease
expired) stay local, as before HA replicated them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import zlib
from collections.abc import Callable
from typing import Any

from dataplane.pop import PopState
from dataplane.store.message import MessageToStore
from dataplane.store.status import GetMessageStatus, PutMessageStatus

__all__ = ("POP_TOPIC", "PopReplicator")

logger = logging.getLogger(__name__)

POP_TOPIC = "rmq_sys_pop_state"
_RECORDS, _SNAPSHOTS = 0, 1  # queue ids
_READ_BATCH = 256
_SNAPSHOT_PART = 512 << 10  # bytes per snapshot record, well under the store's message limit
_SNAPSHOT_TRIES = 8  # older snapshots tried when the newest is incomplete


class PopReplicator:
    """Writes this master's POP changes into the CommitLog and applies replicated ones."""

    def __init__(
        self,
        pop: PopState,
        store: Any,
        node: str,
        is_master: Callable[[], bool],
        snapshot_every: int = 10_000,
    ) -> None:
        self.pop = pop
        self.store = store
        self.node = node
        self.is_master = is_master
        self.snapshot_every = snapshot_every
        self.published = 0
        self.applied = 0
        self.snapshots = 0
        self._since_snapshot = 0
        self._next_snapshot = snapshot_every
        self._publishing = False
        self._loop: Any = None
        self._loop_thread = 0

    def start(self, loop: Any) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self.pop.sink = self.publish
        self.store.add_dispatch_listener(self._on_dispatch)
        self.catch_up()

    #
    # Master: PopState journal lines -> CommitLog
    #

    def publish(self, lines: list[str]) -> None:
        if not self.is_master():
            return
        self.catch_up()  # a master never writes before it applied everything it holds
        msg = MessageToStore(POP_TOPIC, 0, "".join(lines).encode(), {"POP_NODE": self.node})
        self._publishing = True
        try:
            result = self.store.put_messages([msg])
        finally:
            self._publishing = False
        if result.status not in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
            logger.warning("POP state not replicated (%s); it stays on this node", result.status.name)
            return
        self.published += 1
        if result.entries and result.entries[0].queue_offset == self.pop.cl_next:
            self.pop.cl_next += 1  # our own record: already applied
            self._since_snapshot += 1
            if self._since_snapshot >= self._next_snapshot:
                self.write_snapshot()

    def write_snapshot(self) -> None:
        """Put the whole PopState (== the fold of queue 0 below ``cl_next``) into queue 1."""
        items = self.pop.export()
        data = zlib.compress(json.dumps(items, separators=(",", ":")).encode(), 1)
        parts = [data[i : i + _SNAPSHOT_PART] for i in range(0, len(data), _SNAPSHOT_PART)] or [b""]
        cl = str(self.pop.cl_next)
        msgs = [
            MessageToStore(POP_TOPIC, _SNAPSHOTS, part, {"POP_SNAPSHOT": cl, "POP_PART": f"{i}/{len(parts)}"})
            for i, part in enumerate(parts)
        ]
        self._publishing = True
        try:
            result = self.store.put_messages(msgs)
        finally:
            self._publishing = False
        self._since_snapshot = 0
        self._next_snapshot = max(self.snapshot_every, self.pop.in_flight_count())
        if result.status not in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
            logger.warning("POP state snapshot not written (%s)", result.status.name)
            return
        self.snapshots += 1

    #
    # Replica (and a master's start-up): CommitLog -> PopState
    #

    def _on_dispatch(self, topic: str, queue_id: int, max_offset: int) -> None:
        if topic != POP_TOPIC or self._publishing:
            return
        if threading.get_ident() == self._loop_thread:
            self.catch_up()  # replication appends on the loop thread: applied before the next RPC
        elif self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self.catch_up)

    def catch_up(self) -> None:
        """Apply every record of the topic from ``cl_next`` on."""
        pop = self.pop
        if pop.cl_next == self.store.get_max_offset_in_queue(POP_TOPIC, _RECORDS):
            return  # the common case on a master: nothing to apply
        while True:
            result = self.store.get_messages(POP_TOPIC, _RECORDS, pop.cl_next, max_count=_READ_BATCH)
            if pop.cl_next > result.max_offset:
                # the CommitLog holds less than this state reflects (truncated while stopped)
                self.rebuild()
                continue
            if result.status is GetMessageStatus.OFFSET_TOO_SMALL:
                logger.warning(
                    "POP state records %d..%d were deleted before they were applied",
                    pop.cl_next,
                    result.next_begin_offset,
                )
            if not result.messages:
                if result.next_begin_offset > pop.cl_next:
                    pop.cl_next = result.next_begin_offset
                return
            for msg in result.messages:
                try:
                    pop.apply_replicated(msg.body, msg.queue_offset + 1)
                    self.applied += 1
                except (ValueError, KeyError, TypeError):
                    logger.exception("POP state record %d is unreadable; skipped", msg.queue_offset)
                    pop.cl_next = msg.queue_offset + 1
            if len(result.messages) < _READ_BATCH:
                return

    def rebuild(self) -> None:
        """The CommitLog was truncated (or holds less than this state reflects): drop the POP state
        and rebuild it from the newest snapshot in the CommitLog and the records after it."""
        snapshot = self._newest_snapshot()
        if snapshot is None:
            start = int(self.store.get_min_offset_in_queue(POP_TOPIC, _RECORDS))
            logger.warning("rebuilding POP state from %s record %d (no snapshot)", POP_TOPIC, start)
            self.pop.clear(start)
        else:
            items = snapshot
            logger.warning("rebuilding POP state from the snapshot at %s record %s", POP_TOPIC, items[-1])
            self.pop.clear(0)
            self.pop.restore(items)
            self.pop.compact()
        self._since_snapshot = 0
        self.catch_up()

    def _newest_snapshot(self) -> list[dict[str, Any]] | None:
        store = self.store
        low = int(store.get_min_offset_in_queue(POP_TOPIC, _SNAPSHOTS))
        end = int(store.get_max_offset_in_queue(POP_TOPIC, _SNAPSHOTS))
        records_end = int(store.get_max_offset_in_queue(POP_TOPIC, _RECORDS))
        for _ in range(_SNAPSHOT_TRIES):
            if end <= low:
                return None
            last = store.get_messages(POP_TOPIC, _SNAPSHOTS, end - 1, max_count=1).messages
            if not last:
                return None
            try:
                index, count = (int(x) for x in last[0].properties["POP_PART"].split("/"))
                cl = int(last[0].properties["POP_SNAPSHOT"])
            except (KeyError, ValueError):
                end -= 1
                continue
            first = end - 1 - index
            parts = store.get_messages(POP_TOPIC, _SNAPSHOTS, max(first, low), max_count=count).messages
            same = [m for m in parts if m.properties.get("POP_SNAPSHOT") == str(cl)]
            if index == count - 1 and len(same) == count and cl <= records_end:
                try:
                    items: list[dict[str, Any]] = json.loads(zlib.decompress(b"".join(m.body for m in same)))
                    return items
                except (ValueError, zlib.error):
                    logger.warning("POP state snapshot at %s record %d is unreadable", POP_TOPIC, cl)
            end = max(first, low)  # before this (incomplete or unreadable) snapshot
        return None
