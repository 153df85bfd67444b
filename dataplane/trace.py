"""Message trace: the life of each message (stored, deliveries, acks, retries, DLQ, redrive).

Events are buffered in memory and written in batches to the system topic ``rmq_sys_TRACE_DATA``
(RocketMQ keeps its traces in a topic too). A record is a JSON list of single events
``[message_id, topic, event, time_ms, group, attempt, client_id, detail]`` and of batches, the events
of one receive's deliveries or one ack's entries, which share all but the id and the attempt:
``{"ids": [...], "attempts": [...], "topic", "event", "time_ms", "group", "client_id"}``. A record
holds the events of up to 256 message ids; its KEYS are the distinct ids, so the store's IndexFile
finds every record about a message. Retention is the CommitLog's: trace records go when their
segment goes. The buffer is bounded; past ``MAX_PENDING`` events the oldest are dropped and counted
(tracing never slows the data path or grows memory without bound). See docs/trace.md.

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
from typing import Any, NamedTuple

import orjson

from dataplane.metrics import TRACE_EVENTS_DROPPED
from dataplane.names import DLQ_PREFIX, RETRY_PREFIX
from dataplane.store.status import PutMessageStatus
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
# Message ids per record: KEYS (up to 256 ids of ~32 characters) stay far below the 64 KiB
# properties limit, and a flush of 50 ms at 5,000 messages/s (about 500 events) is two records, so a
# message's delivery and its ack, a few ms apart, are mostly indexed once.
_IDS_PER_RECORD = 256
# Flushes are frequent and written a record per loop pass: a flush holds the broker's event loop
# while it encodes and stores, and every 0.2 s at 5,000 messages/s (2,000 events, 3.3 ms) that stall
# was a good part of the broker's end-to-end p99 (docs/benchmarks.md, "Pauses on the event loop").
_FLUSH_S = 0.05
_RECORDS_PER_PASS = 1
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


# A pending event: the fields of a TraceEvent in a plain tuple. The garbage collector stops tracking
# a tuple of strings and ints (not a NamedTuple's), so the events of the last fifth of a second do
# not reach the oldest generation and make its full collections come sooner.
_Pending = tuple[str, str, str, int, str, int, str, str]
# A pending batch (``record_many``): (message ids, attempts, topic, event, time_ms, group, client_id),
# the ids and the attempts tuples of one length; untracked by the collector as a pending event is.
# One tuple per receive or ack instead of one per message, and no sort at a flush: less of the
# loop's time per consumed message (docs/benchmarks.md, "Trace events by the batch").
_PendingBatch = tuple[tuple[str, ...], tuple[int, ...], str, str, int, str, str]
_BATCH_FIELDS = ("ids", "attempts", "topic", "event", "time_ms", "group", "client_id")  # in a record


def _size(item: _Pending | _PendingBatch) -> int:
    """Events in a pending item."""
    first = item[0]
    return len(first) if type(first) is tuple else 1


def _expand(item: Any) -> list[TraceEvent]:
    """The events of a pending item or of a record's entry (a list: one event; a dict: a batch)."""
    if type(item) is dict:
        item = tuple(item[field] for field in _BATCH_FIELDS)
    elif type(item[0]) is not tuple:
        return [TraceEvent(*item)]
    ids, attempts, topic, event, time_ms, group, client_id = item
    return [
        TraceEvent(mid, topic, event, time_ms, group, attempt, client_id)
        for mid, attempt in zip(ids, attempts, strict=True)
    ]


def _holds(item: Any, message_id: str) -> bool:
    """Whether a pending item or a record's entry has an event of ``message_id``."""
    if type(item) is dict:
        return message_id in item["ids"]
    first = item[0]
    return message_id in first if type(first) is tuple else first == message_id


def _events_in(records: list[list[_Pending | _PendingBatch]]) -> int:
    """Events in records taken from the buffer."""
    return sum(_size(item) for record in records for item in record)


def _as_json(item: _Pending | _PendingBatch) -> Any:
    """A pending item as a record's entry."""
    return dict(zip(_BATCH_FIELDS, item, strict=True)) if type(item[0]) is tuple else item


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

    Called on the broker's loop (the handlers record, ``run`` flushes there).
    """

    def __init__(self, store: Any, *, enabled: bool = True, max_pending: int = MAX_PENDING) -> None:
        self.store = store
        self.enabled = enabled and hasattr(store, "query_messages_by_key")
        self._pending: collections.deque[_Pending | _PendingBatch] = collections.deque()
        self._queued = 0  # events in _pending
        self._max_pending = max_pending
        self.dropped = 0
        # the status of the last failed write while writes keep failing (None: the last one stored)
        self._failing: PutMessageStatus | None = None
        self._task: asyncio.Task[None] | None = None

    def pending_events(self) -> list[TraceEvent]:
        """The events not written yet, oldest first."""
        return [event for item in self._pending for event in _expand(item)]

    def _trim(self) -> None:
        """Drop the oldest events past ``max_pending`` (part of a batch when it straddles the bound)."""
        over = self._queued - self._max_pending
        pending = self._pending
        while over > 0 and pending:
            oldest = pending[0]
            n = _size(oldest)
            if n > over:  # the newer part of a batch stays
                pending[0] = (oldest[0][over:], oldest[1][over:], *oldest[2:])  # type: ignore[assignment]
                n = over
            else:
                pending.popleft()
            self._queued -= n
            self._drop(n)
            over -= n

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
        self._pending.append((message_id, topic, event, _now_ms(), group, attempt, client_id, detail))
        self._queued += 1
        if self._queued > self._max_pending:
            self._trim()

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
        deliveries or an ack's entries. The same events as :meth:`record` for each, kept as one
        batch (one clock read, one tuple of ids and one of attempts for the lot)."""
        if not self.enabled:
            return
        kept = [item for item in items if item[0]]
        if not kept:
            return
        ids, attempts = zip(*kept, strict=True)
        self._pending.append((ids, attempts, topic, event, _now_ms(), group, client_id))
        self._queued += len(ids)
        if self._queued > self._max_pending:
            self._trim()

    def _take(self) -> list[list[_Pending | _PendingBatch]]:
        """Everything pending, as records of at most ``_IDS_PER_RECORD`` events (a larger batch is
        split), in the order recorded: a message's delivery and its ack, a few ms apart, mostly
        share a record and its index key."""
        pending = self._pending
        items = [pending.popleft() for _ in range(len(pending))]
        self._queued = 0
        records: list[list[_Pending | _PendingBatch]] = []
        record: list[_Pending | _PendingBatch] = []
        size = 0
        for item in items:
            n = _size(item)
            while n > _IDS_PER_RECORD:  # a batch larger than a record: its head fills records alone
                if record:
                    records.append(record)
                    record, size = [], 0
                records.append([(item[0][:_IDS_PER_RECORD], item[1][:_IDS_PER_RECORD], *item[2:])])  # type: ignore[list-item]
                item = (item[0][_IDS_PER_RECORD:], item[1][_IDS_PER_RECORD:], *item[2:])  # type: ignore[assignment]
                n -= _IDS_PER_RECORD
            if size + n > _IDS_PER_RECORD:
                records.append(record)
                record, size = [], 0
            record.append(item)
            size += n
        if record:
            records.append(record)
        return records

    @staticmethod
    def _to_store(record: list[_Pending | _PendingBatch]) -> Any:
        from dataplane.store.message import MessageToStore

        ids: dict[str, None] = {}
        for item in record:
            first = item[0]
            if type(first) is tuple:
                ids.update(dict.fromkeys(first))
            else:
                ids[first] = None  # type: ignore[index]
        # KEYS is space-separated, so an id with a space in it cannot be a key: joined in C, and
        # filtered in Python only when the join shows such an id
        keys = " ".join(ids)
        if keys.count(" ") != len(ids) - 1:
            keys = " ".join(i for i in ids if " " not in i)
        entries = [_as_json(item) for item in record]
        # orjson writes what json.dumps(separators=(",", ":")) writes (non-ASCII as UTF-8 rather than
        # \u escapes), several times faster
        try:
            body = orjson.dumps(entries)
        except TypeError:  # text orjson refuses (a lone surrogate) or an int past 64 bits: escaped
            body = json.dumps(entries, separators=(",", ":")).encode()
        return MessageToStore(TRACE_TOPIC, 0, body, {"KEYS": keys} if keys else {})

    async def flush_async(self) -> None:
        if not getattr(self.store, "writable", True):
            self._hold()  # an HA replica: its CommitLog is the master's copy
            return
        if self._failing is PutMessageStatus.SERVICE_NOT_AVAILABLE:
            logger.info("trace: the store is writable again; writing %d kept events", self._queued)
            self._failing = None
        batches = self._take()
        for start in range(0, len(batches), _RECORDS_PER_PASS):
            if start:
                await asyncio.sleep(0)  # what waits on the loop runs between slices
            part = batches[start : start + _RECORDS_PER_PASS]
            result = await self.store.put_messages_async([self._to_store(b) for b in part])
            if result.ok:
                if self._failing is not None:
                    logger.info("trace: events are stored again (%d dropped so far)", self.dropped)
                    self._failing = None
                continue
            if result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE:  # demoted while flushing
                self._put_back(batches[start:])
                self._hold()
                return
            lost = self._drop(_events_in(part))
            if result.status is not self._failing:  # once per run of failures, not every flush
                logger.warning("trace: %d events not stored (%s)", lost, result.status)
            self._failing = result.status

    def _drop(self, events: int) -> int:
        """Count ``events`` lost (the buffer's bound, or a store that refused them); returns it."""
        self.dropped += events
        TRACE_EVENTS_DROPPED.inc(events)
        return events

    def _hold(self) -> None:
        """The store takes no writes: the events stay pending (bounded as ever, the oldest dropped
        past ``max_pending``) until it does, so a node promoted to master writes them then."""
        if self._queued and self._failing is not PutMessageStatus.SERVICE_NOT_AVAILABLE:
            logger.info(
                "trace: the store is not writable (an HA replica); %d events kept until it is", self._queued
            )
            self._failing = PutMessageStatus.SERVICE_NOT_AVAILABLE

    def _put_back(self, records: list[list[_Pending | _PendingBatch]]) -> None:
        """Records taken but not stored, back before whatever was recorded meanwhile."""
        items = [item for record in records for item in record]
        self._pending.extendleft(reversed(items))
        self._queued += sum(map(_size, items))
        if self._queued > self._max_pending:
            self._trim()

    def flush(self) -> None:
        """Write what is buffered (shutdown, before the store closes)."""
        batches = self._take()
        if not batches or not getattr(self.store, "running", True):
            return
        if not getattr(self.store, "writable", True):  # a replica stopping: nowhere to write them
            lost = self._drop(_events_in(batches))
            logger.info("trace: %d events kept on this replica are dropped at its stop", lost)
            return
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
                # a record that is not ours to read (orjson's errors are ValueErrors) is skipped
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    for item in _loads(record.body):
                        if _holds(item, message_id):
                            found += [e for e in _expand(item) if e.message_id == message_id]
        found += self._stored_events(message_id)
        found += [
            e
            for item in self._pending
            if _holds(item, message_id)
            for e in _expand(item)
            if e.message_id == message_id
        ]
        if topic is not None:
            found = [e for e in found if e.topic == topic]
        found.sort(key=lambda e: e.time_ms)
        return found[:limit]
