"""Message trace: the life of each message (stored, deliveries, acks, retries, DLQ, redrive).

Events are buffered in memory and written in batches to the system topic ``rmq_sys_TRACE_DATA``
(RocketMQ keeps its traces in a topic too). One record holds up to 64 events as a JSON list
``[[message_id, topic, event, time_ms, group, attempt, client_id, detail], ...]``; its KEYS are the
distinct message ids, so the store's IndexFile finds every record about a message. Retention is the
CommitLog's: trace records go when their segment goes. The buffer is bounded; past
``MAX_PENDING`` events the oldest are dropped and counted (tracing never slows the data path or
grows memory without bound). See docs/trace.md.

The "stored" event of a sent message is not written: the message itself, in the CommitLog and
indexed by its id, says when and where it was stored, so :meth:`MessageTracer.events` reads it from
there. A send therefore costs no trace record; deliveries, acks, retries and DLQ moves do.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any, NamedTuple

import orjson

from dataplane.names import DLQ_PREFIX, RETRY_PREFIX
from dataplane.timer.service import P_REAL_TOPIC, P_TIMER_OUT_MS, TIMER_TOPIC
from dataplane.transaction.service import HALF_TOPIC

__all__ = ("EVENTS", "TRACE_TOPIC", "MessageTracer", "TraceEvent")

logger = logging.getLogger(__name__)

TRACE_TOPIC = "rmq_sys_TRACE_DATA"
EVENTS = (
    "stored",
    "delivered",
    "acked",
    "nacked",
    "invisible_changed",
    "retried",
    "dead_lettered",
    "redriven",
)
MAX_PENDING = 200_000
_BATCH = 64  # events per record: keys stay far below the 64 KiB properties limit
# Flushes are frequent and written a few records per loop pass: a flush holds the broker's event loop
# while it sorts, encodes and stores, and every 0.2 s at 5,000 messages/s (2,000 events, 3.3 ms)
# that stall was a good part of the broker's end-to-end p99 (docs/benchmarks.md, "Pauses on the
# event loop").
_FLUSH_S = 0.05
_RECORDS_PER_PASS = 4
_MAX_RECORDS_READ = 64
_MAX_COPIES_READ = 16  # stored copies of one message id (timer/half first, redelivered, redriven)
# System topics whose messages stand for a message of REAL_TOPIC (timer wheel, transaction halves).
_HELD_FOR_LATER: dict[str, Callable[[dict[str, str]], str]] = {
    TIMER_TOPIC: lambda props: f"delayed until {props.get(P_TIMER_OUT_MS, '?')}",
    HALF_TOPIC: lambda props: "half message (transaction)",
}


class TraceEvent(NamedTuple):
    message_id: str
    topic: str
    event: str
    time_ms: int
    group: str = ""
    attempt: int = 0
    client_id: str = ""
    detail: str = ""


_MESSAGE_ID = itemgetter(0)  # of a TraceEvent or a pending event
# A pending event: the fields of a TraceEvent in a plain tuple. The garbage collector stops tracking
# a tuple of strings and ints (not a NamedTuple's), so the events of the last fifth of a second do
# not reach the oldest generation and make its full collections come sooner.
_Pending = tuple[str, str, str, int, str, int, str, str]


def _loads(body: bytes) -> Any:
    """A record's events: orjson, or json for what orjson refuses (the escaped records of
    ``_to_store``'s fallback, lone surrogates and ints past 64 bits)."""
    try:
        return orjson.loads(body)
    except ValueError:
        return json.loads(body)


def _now_ms() -> int:
    return int(time.time() * 1000)


class MessageTracer:
    """Collects trace events from the RPC handlers and writes them to the trace topic.

    ``record`` may be called from any thread (a deque append); ``run`` flushes on the broker loop.
    """

    def __init__(self, store: Any, *, enabled: bool = True, max_pending: int = MAX_PENDING) -> None:
        self.store = store
        self.enabled = enabled and hasattr(store, "query_messages_by_key")
        self._pending: collections.deque[_Pending] = collections.deque(maxlen=max_pending)
        self._max_pending = max_pending
        self.dropped = 0
        self._task: asyncio.Task[None] | None = None

    def record(
        self,
        message_id: str,
        topic: str,
        event: str,
        *,
        group: str = "",
        attempt: int = 0,
        client_id: str = "",
        detail: str = "",
    ) -> None:
        if not self.enabled or not message_id:
            return
        if len(self._pending) >= self._max_pending:
            self.dropped += 1
        self._pending.append((message_id, topic, event, _now_ms(), group, attempt, client_id, detail))

    def record_many(
        self,
        items: Iterable[tuple[str, int]],
        topic: str,
        event: str,
        *,
        group: str = "",
        client_id: str = "",
    ) -> None:
        """One ``event`` per (message id, attempt) of ``items``, all at one time: a receive's
        deliveries or an ack's entries. The same events as :meth:`record` for each, at a fraction
        of the cost per event (one clock read and one deque extend for the lot)."""
        if not self.enabled:
            return
        now = _now_ms()
        events = [(mid, topic, event, now, group, attempt, client_id, "") for mid, attempt in items if mid]
        pending = self._pending
        over = len(pending) + len(events) - self._max_pending
        if over > 0:
            self.dropped += min(over, len(events))
        pending.extend(events)

    def _take(self) -> list[list[_Pending]]:
        pending = self._pending
        events = [pending.popleft() for _ in range(len(pending))]
        # A message's events of one flush go to the same record (the sort is stable: each keeps its
        # order), so the record is indexed once for it rather than once per record holding one of
        # them: with concurrent consumers a delivery and its ack used to land in different records.
        events.sort(key=_MESSAGE_ID)
        return [events[i : i + _BATCH] for i in range(0, len(events), _BATCH)]

    @staticmethod
    def _to_store(batch: list[_Pending]) -> Any:
        from dataplane.store.message import MessageToStore

        # KEYS is space-separated, so an id with a space in it cannot be a key: joined in C, and
        # filtered in Python only when the join shows such an id (the batch is sorted by id)
        ids = dict.fromkeys(map(_MESSAGE_ID, batch))
        keys = " ".join(ids)
        if keys.count(" ") != len(ids) - 1:
            keys = " ".join(i for i in ids if " " not in i)
        # orjson writes what json.dumps(separators=(",", ":")) wrote (an event as a list; non-ASCII
        # as UTF-8 rather than \u escapes), several times faster: a record of 64 events is written
        # per 32 messages consumed
        try:
            body = orjson.dumps(batch)
        except TypeError:  # text orjson refuses (a lone surrogate) or an int past 64 bits: escaped
            body = json.dumps(batch, separators=(",", ":")).encode()
        return MessageToStore(TRACE_TOPIC, 0, body, {"KEYS": keys} if keys else {})

    async def flush_async(self) -> None:
        batches = self._take()
        for start in range(0, len(batches), _RECORDS_PER_PASS):
            if start:
                await asyncio.sleep(0)  # what waits on the loop runs between slices
            part = batches[start : start + _RECORDS_PER_PASS]
            result = await self.store.put_messages_async([self._to_store(b) for b in part])
            if not result.ok:
                logger.warning("trace: %d events not stored (%s)", sum(map(len, part)), result.status)

    def flush(self) -> None:
        """Write what is buffered (shutdown, before the store closes)."""
        batches = self._take()
        if batches and getattr(self.store, "running", True):
            self.store.put_messages([self._to_store(b) for b in batches])

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.enabled:
            self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(_FLUSH_S)
            try:
                await self.flush_async()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("trace flush failed")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _stored_events(self, message_id: str) -> list[TraceEvent]:
        """One "stored" event per topic the message was sent to: its earliest copy in the store (a
        timer or half message stands for its real topic; DLQ and retry copies are not sends)."""
        query = getattr(self.store, "query_messages_by_uniq_key", None)
        if query is None or " " in message_id:
            return []
        first: dict[str, TraceEvent] = {}
        for copy in query(message_id, _MAX_COPIES_READ):
            props = copy.properties
            held = _HELD_FOR_LATER.get(copy.topic)
            if held is not None:
                topic, detail = props.get(P_REAL_TOPIC, copy.topic), held(props)
            elif copy.topic.startswith((DLQ_PREFIX, RETRY_PREFIX)):
                continue
            else:
                topic, detail = copy.topic, f"queue {copy.queue_id}"
            seen = first.get(topic)
            if seen is None or copy.store_timestamp < seen.time_ms:
                first[topic] = TraceEvent(message_id, topic, "stored", copy.store_timestamp, detail=detail)
        return list(first.values())

    def events(self, message_id: str, topic: str | None = None, limit: int = 256) -> list[TraceEvent]:
        """Every recorded event of ``message_id`` (of ``topic`` when given), oldest first."""
        found: list[TraceEvent] = []
        if self.enabled and " " not in message_id:
            for record in self.store.query_messages_by_key(TRACE_TOPIC, message_id, _MAX_RECORDS_READ):
                with contextlib.suppress(ValueError, TypeError):  # orjson's errors are ValueErrors
                    for item in _loads(record.body):
                        event = TraceEvent(*item)
                        if event.message_id == message_id:
                            found.append(event)
        found += self._stored_events(message_id)
        found += [TraceEvent(*e) for e in list(self._pending) if e[0] == message_id]
        if topic is not None:
            found = [e for e in found if e.topic == topic]
        found.sort(key=lambda e: e.time_ms)
        return found[:limit]
