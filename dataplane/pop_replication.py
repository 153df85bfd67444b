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

Changes made while this node cannot write (a replica serving suggested reads, a master whose lease
expired) stay local, as before HA replicated them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from dataplane.pop import PopState
from dataplane.store.message import MessageToStore
from dataplane.store.status import GetMessageStatus, PutMessageStatus

__all__ = ("POP_TOPIC", "PopReplicator")

logger = logging.getLogger(__name__)

POP_TOPIC = "rmq_sys_pop_state"
_READ_BATCH = 256


class PopReplicator:
    """Writes this master's POP changes into the CommitLog and applies replicated ones."""

    def __init__(self, pop: PopState, store: Any, node: str, is_master: Callable[[], bool]) -> None:
        self.pop = pop
        self.store = store
        self.node = node
        self.is_master = is_master
        self.published = 0
        self.applied = 0
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
        if pop.cl_next == self.store.get_max_offset_in_queue(POP_TOPIC, 0):
            return  # the common case on a master: nothing to apply
        while True:
            result = self.store.get_messages(POP_TOPIC, 0, pop.cl_next, max_count=_READ_BATCH)
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
        """The CommitLog was truncated: drop the POP state and replay it from the CommitLog."""
        start = int(self.store.get_min_offset_in_queue(POP_TOPIC, 0))
        logger.warning("CommitLog truncated: rebuilding POP state from %s offset %d", POP_TOPIC, start)
        self.pop.clear(start)
        self.catch_up()
