"""ReceiveMessage (POP with long polling), AckMessage, ChangeInvisibleDuration, ForwardToDLQ."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import time
from collections.abc import AsyncIterator
from itertools import repeat
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2

from dataplane.auto_renew import Renewal
from dataplane.broker import Broker
from dataplane.buffered_stream import Encoded
from dataplane.clients import CLIENT_ID_HEADER, header
from dataplane.errors import (
    OK_STATUS,
    BadRequest,
    BrokerError,
    IllegalInvisibleTime,
    InvalidReceiptHandle,
    ok_status,
    status_of,
)
from dataplane.filters import MessageFilter, compile_filter
from dataplane.metadata import GroupConfig
from dataplane.metrics import RECEIVE_WRITE, TRAFFIC_OUT
from dataplane.names import BROADCAST_SEP, base_group, dlq_topic, resolve
from dataplane.pop import ATTEMPT, NONCE, OFFSET, UNTIL, WAITING, InFlight
from dataplane.receipt import ReceiptHandle
from dataplane.receive_attempts import AttemptKey
from dataplane.retry import retry_delay_ms
from dataplane.services import produce as p
from dataplane.services.base import call_metadata
from dataplane.timer.service import P_DELIVER_MS
from dataplane.wire import request_bytes
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = (
    "ENCODER",
    "P_DLQ_ATTEMPTS",
    "P_DLQ_OFFSET",
    "P_DLQ_QUEUE",
    "P_REDRIVE_GROUP",
    "ack_message",
    "base_group",
    "change_invisible_duration",
    "encode_received",
    "fill_v2_message",
    "forward_to_dlq",
    "receive_message",
    "to_v2_message",
)

logger = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _ts(ms: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _duration_ms(d: duration_pb2.Duration) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


# The body digest of a delivered message: SHA-1, upper-case hex. The official clients (Java, Python,
# Node.js, C#) check MD5 and SHA-1 alike, upper-case hex (Go compares lower-case hex for both), and
# CRC32's text differs between them (docs/broker.md). SHA-1 rather than the proxy's MD5: every
# delivery hashes its body, and on a CPU with SHA extensions OpenSSL's SHA-1 costs less per byte
# (broker_work's receive figure fell from 7.9-8.3 to 7.0-7.3 us per 1 KiB message: docs/benchmarks.md).
_DIGEST_SHA1 = int(pb.DigestType.SHA1)
_ENC_GZIP = pb.Encoding.GZIP
_ENC_IDENTITY = pb.Encoding.IDENTITY
_MT_NORMAL = pb.MessageType.NORMAL
_CODE_OK = int(pb.Code.OK)
_HIDDEN_KEYS = p.SYSTEM_PROPERTY_KEYS
_WRITE = RECEIVE_WRITE.labels()  # the child once, not a labels() lookup per receive
_MT_BY_TEXT = {str(int(v)): int(v) for v in pb.MessageType.values()}  # the stored __MQ_TYPE text


def to_v2_message(
    stored: Any,
    topic: pb.Resource,
    *,
    store_host: str,
    receipt_handle: str | None = None,
    attempt: int | None = None,
    invisible_ms: int | None = None,
) -> pb.Message:
    """A stored record as a v2 Message with every system property the clients rely on."""
    message = pb.Message()
    fill_v2_message(message, stored, topic, store_host, receipt_handle, attempt, invisible_ms)
    return message


def fill_v2_message(
    m: pb.Message,
    stored: Any,
    topic: pb.Resource,
    store_host: str,
    receipt_handle: str | None = None,
    attempt: int | None = None,
    invisible_ms: int | None = None,
) -> None:
    """Write ``stored`` into the empty ``m`` (e.g. a response's ``message`` field) in place.

    Building inside the response, field by field, saves the copies that passing sub-messages to
    constructors makes (about half the cost per received message). The bytes are the same.
    """
    props = stored.properties
    get = props.get
    body = stored.body
    m.topic.CopyFrom(topic)
    sp = m.system_properties
    tag = get(p.P_TAGS)
    if tag is not None:
        sp.tag = tag
    keys = get(p.P_KEYS)
    if keys:
        sp.keys.extend(keys.split())
    message_id = get(p.P_UNIQ) or stored.msg_id
    sp.message_id = message_id
    digest = sp.body_digest
    digest.type = _DIGEST_SHA1  # type: ignore[assignment]
    digest.checksum = hashlib.sha1(body).hexdigest().upper()
    sp.body_encoding = _ENC_GZIP if get(p.P_ENCODING) == "GZIP" else _ENC_IDENTITY
    mtype = get(p.P_TYPE)
    sp.message_type = _MT_NORMAL if mtype is None else (_MT_BY_TEXT.get(mtype) or int(mtype))  # type: ignore[assignment]
    ms = stored.born_timestamp
    ts = sp.born_timestamp
    ts.seconds = ms // 1000
    ts.nanos = (ms % 1000) * 1_000_000
    sp.born_host = get(p.P_BORN_HOST) or stored.born_host[0]
    ms = stored.store_timestamp
    ts = sp.store_timestamp
    ts.seconds = ms // 1000
    ts.nanos = (ms % 1000) * 1_000_000
    sp.store_host = store_host
    sp.queue_id = stored.queue_id
    sp.queue_offset = stored.queue_offset
    group = get(p.P_GROUP)
    if group is not None:
        sp.message_group = group
    trace = get(p.P_TRACE)
    if trace is not None:
        sp.trace_context = trace
    deliver_ms = get(P_DELIVER_MS)  # set on delay messages when the timer wheel releases them
    if deliver_ms is not None and deliver_ms.isdigit():
        sp.delivery_timestamp.FromMilliseconds(int(deliver_ms))
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    if attempt is not None:
        sp.delivery_attempt = attempt
    if invisible_ms is not None:
        d = sp.invisible_duration
        d.seconds = invisible_ms // 1000
        d.nanos = (invisible_ms % 1000) * 1_000_000
    dlq_origin = get(p.P_DLQ_TOPIC)
    if dlq_origin is not None:
        sp.dead_letter_queue.topic = dlq_origin
        sp.dead_letter_queue.message_id = message_id
    user = m.user_properties
    for key, value in props.items():
        if key not in _HIDDEN_KEYS and not key.startswith("__"):
            user[key] = value
    m.body = body


def _encode_received_py(
    stored: Any,
    topic: bytes,
    store_host: str,
    receipt_handle: str | None,
    attempt: int | None,
    invisible_ms: int | None,
) -> bytes:
    response = svc.ReceiveMessageResponse()
    topic_pb = pb.Resource.FromString(topic)
    fill_v2_message(response.message, stored, topic_pb, store_host, receipt_handle, attempt, invisible_ms)
    return response.SerializeToString()


# encode_received(stored, topic, store_host, receipt_handle, attempt, invisible_ms) -> bytes: a
# ReceiveMessageResponse carrying ``stored`` as fill_v2_message builds it, serialized (``topic`` is the
# serialized Resource the client named). Compiled (dataplane/_v2_codec.c) it costs a quarter to a
# third of the Python builder; ENCODER says which one runs.
try:
    from dataplane import _v2_codec  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - no compiler where the broker was built
    _v2_codec = None

if _v2_codec is not None:
    _v2_codec.configure(hashlib.sha1, frozenset(_HIDDEN_KEYS), p.STORE_PROPERTY_NAMES)
    encode_received = _v2_codec.encode_received
    ENCODER = "compiled"
else:  # pragma: no cover
    encode_received = _encode_received_py
    ENCODER = "python"


def _fetch_one(broker: Broker, topic: str, queue_id: int, offset: int) -> Any | None:
    result = broker.store.get_messages(topic, queue_id, offset, max_count=1)
    for msg in result.messages:
        if msg.queue_offset == offset:
            return msg
    return None


# Where a dead letter came from (the original topic is p.P_DLQ_TOPIC) and how often it was delivered.
P_DLQ_QUEUE = "__MQ_DLQ_ORIGIN_QID"
P_DLQ_OFFSET = "__MQ_DLQ_ORIGIN_OFFSET"
P_DLQ_ATTEMPTS = "__MQ_DLQ_ATTEMPTS"
# A re-driven message is for one group only: other groups pass over it (docs/broker.md, Dead letters).
P_REDRIVE_GROUP = "__MQ_REDRIVE_GROUP"


def _other_group(stored: Any, group: str) -> bool:
    """A message re-driven for another group (passed over like a filtered-out one)."""
    target = stored.properties.get(P_REDRIVE_GROUP)
    return target is not None and target != group


async def _to_dlq(
    broker: Broker, group: str, stored: Any, attempts: int = 0, client_id: str = "", why: str = ""
) -> None:
    from dataplane.store.message import MessageToStore

    group = base_group(group)
    properties = dict(stored.properties)
    properties.pop(P_REDRIVE_GROUP, None)
    properties[p.P_DLQ_TOPIC] = stored.topic
    properties[P_DLQ_QUEUE] = str(stored.queue_id)
    properties[P_DLQ_OFFSET] = str(stored.queue_offset)
    properties[P_DLQ_ATTEMPTS] = str(attempts or stored.reconsume_times + 1)
    await broker.store.put_messages_async(
        [
            MessageToStore(
                topic=dlq_topic(group),
                queue_id=0,
                body=stored.body,
                properties=properties,
                born_timestamp=stored.born_timestamp,
                born_host=stored.born_host,
                reconsume_times=stored.reconsume_times + 1,
            )
        ]
    )
    logger.info("message %s of %s moved to %s", properties.get(p.P_UNIQ), stored.topic, dlq_topic(group))
    broker.tracer.record(
        properties.get(p.P_UNIQ, ""),
        stored.topic,
        "dead_lettered",
        group=group,
        attempt=int(properties[P_DLQ_ATTEMPTS]),
        client_id=client_id,
        detail=why,
    )


class _Popped:
    __slots__ = ("attempt", "entry", "stored")

    def __init__(self, stored: Any, entry: InFlight, attempt: int) -> None:
        self.stored, self.entry, self.attempt = stored, entry, attempt


_rotation: dict[tuple[str, str], int] = {}


def _try_pop(
    broker: Broker,
    group: GroupConfig,
    topic: str,
    queue_count: int,
    flt: MessageFilter,
    batch: int,
    invisible_ms: int,
    dlq: list[Any],
) -> list[_Popped]:
    """Pop up to ``batch`` messages; those out of attempts are acked and appended to ``dlq``
    as (message, attempts).

    FIFO groups: an expired message is the oldest of its message group, so it goes first; then
    held messages whose group is free; then new ones, holding those whose group is busy.

    Synchronous (no await), so it can run inside one ``pop.batch()``; the caller moves ``dlq``.
    """
    assert broker.pop is not None
    pop = broker.pop
    now = _now_ms()
    out: list[_Popped] = []
    max_attempts = broker.max_attempts(group)
    start = _rotation.get((group.name, topic), 0)
    _rotation[(group.name, topic)] = start + 1
    order = [(start + i) % queue_count for i in range(queue_count)]
    # 1. Messages whose invisible time ran out come back first, with attempt + 1.
    for qid in order:
        pos = pop.peek(group.name, topic, qid)
        if pos is None:
            continue
        for entry in pos.due(now):
            if len(out) >= batch:
                return out
            stored = _fetch_one(broker, topic, qid, entry[OFFSET])
            if stored is None:  # removed by retention
                pop.ack(group.name, topic, qid, entry[OFFSET])
                continue
            if entry[ATTEMPT] >= max_attempts:
                pop.ack(group.name, topic, qid, entry[OFFSET])
                dlq.append((stored, entry[ATTEMPT]))
                continue
            if not entry[WAITING]:  # its invisible time ran out without an ack
                delay = retry_delay_ms(
                    group.retry_policy, entry[ATTEMPT], broker.settings.default_retry_delays_ms
                )
                if delay > 0:  # wait out the group's backoff first; the handle stays valid meanwhile
                    pop.deliver(
                        group.name,
                        topic,
                        qid,
                        entry[OFFSET],
                        entry[ATTEMPT],
                        now + delay,
                        pos.next_offset,
                        waiting=True,
                        nonce=entry[NONCE],
                    )
                    broker.tracer.record(
                        stored.properties.get(p.P_UNIQ, ""),
                        topic,
                        "retried",
                        group=base_group(group.name),
                        attempt=entry[ATTEMPT],
                        detail=f"invisible time ran out; next delivery in {delay} ms",
                    )
                    continue
            if not flt.accepts(stored.properties):
                continue
            attempt = entry[ATTEMPT] + 1
            fresh = pop.deliver(
                group.name, topic, qid, entry[OFFSET], attempt, now + invisible_ms, pos.next_offset
            )
            out.append(_Popped(stored, fresh, attempt))
    if group.fifo or flt.sql is not None:
        busy = (
            _pop_held(broker, group.name, topic, order, batch, now + invisible_ms, out)
            if group.fifo
            else None
        )
        for qid in order:
            if len(out) >= batch:
                break
            _scan_queue(broker, group.name, topic, qid, flt, batch, now + invisible_ms, out, busy)
        return out
    # 2. New messages from each queue's cursor.
    tag_filter = set(flt.tags) if flt.tags is not None else None
    max_offset = broker.store.get_max_offset_in_queue
    for qid in order:
        if len(out) >= batch:
            break
        pos = pop.position(group.name, topic, qid)
        if max_offset(topic, qid) <= pos.next_offset:  # nothing new: what get_messages would find
            continue
        result = broker.store.get_messages(
            topic,
            qid,
            pos.next_offset,
            max_count=batch - len(out),
            tag_filter=tag_filter,
        )
        if result.next_begin_offset < pos.next_offset and not result.messages:
            continue
        taken = [
            stored
            for stored in result.messages
            if P_REDRIVE_GROUP not in stored.properties or not _other_group(stored, base_group(group.name))
        ]
        if taken:
            offsets = [stored.queue_offset for stored in taken]
            entries = pop.deliver_new(group.name, topic, qid, offsets, now + invisible_ms)
            out += map(_Popped, taken, entries, repeat(1))
        pop.advance(group.name, topic, qid, result.next_begin_offset)
    return out


_MAX_HELD = 4096  # FIFO: held messages per queue before its cursor stops (head-of-line blocking)
_SCAN_LIMIT = 4096  # messages one receive looks at per queue when a SQL filter or FIFO skips some


def _pop_held(
    broker: Broker, group: str, topic: str, order: list[int], batch: int, until_ms: int, out: list[_Popped]
) -> set[str]:
    """FIFO: deliver held messages whose message group is free; returns the busy message groups."""
    assert broker.pop is not None
    pop = broker.pop
    positions = [(qid, pop.position(group, topic, qid)) for qid in order]
    busy: set[str] = set()
    for _, pos in positions:
        busy |= pos.busy_groups()
    for qid, pos in positions:
        for offset in sorted(pos.held):
            message_group = pos.groups[offset]
            if message_group in busy:
                continue
            busy.add(message_group)  # delivered now or not, later messages of the group wait
            if len(out) >= batch:
                continue
            stored = _fetch_one(broker, topic, qid, offset)
            if stored is None:  # removed by retention
                pop.ack(group, topic, qid, offset)
                busy.discard(message_group)
                continue
            entry = pop.deliver(group, topic, qid, offset, 1, until_ms, pos.next_offset, message_group)
            out.append(_Popped(stored, entry, 1))
    return busy


def _scan_queue(
    broker: Broker,
    group: str,
    topic: str,
    qid: int,
    flt: MessageFilter,
    batch: int,
    until_ms: int,
    out: list[_Popped],
    busy: set[str] | None,
) -> None:
    """New messages of one queue for a SQL filter and/or a FIFO group (``busy`` not None).

    Messages the filter rejects count as consumed; FIFO messages whose group is busy are held.
    """
    assert broker.pop is not None
    pop = broker.pop
    pos = pop.position(group, topic, qid)
    tag_filter = set(flt.tags) if flt.tags is not None else None
    sql = flt.sql
    scanned = 0
    while len(out) < batch and scanned < _SCAN_LIMIT:
        if busy is not None and len(pos.held) >= _MAX_HELD:
            return
        start = pos.next_offset
        result = broker.store.get_messages(topic, qid, start, max_count=32, tag_filter=tag_filter)
        if not result.messages:
            if result.next_begin_offset > start:  # the tag filter skipped a range
                pop.advance(group, topic, qid, result.next_begin_offset)
                continue
            return
        for stored in result.messages:
            if len(out) >= batch:
                return
            scanned += 1
            offset = stored.queue_offset
            if sql is not None and not sql.matches(stored.properties):
                continue
            if _other_group(stored, base_group(group)):
                continue
            message_group = stored.properties.get(p.P_GROUP) if busy is not None else None
            if message_group is not None:
                assert busy is not None
                if message_group in busy:
                    pop.hold(group, topic, qid, offset, message_group, offset + 1)
                    continue
                busy.add(message_group)
            entry = pop.deliver(group, topic, qid, offset, 1, until_ms, offset + 1, message_group)
            out.append(_Popped(stored, entry, 1))
        pop.advance(group, topic, qid, result.next_begin_offset)


def _poll_deadline_ms(broker: Broker, request: svc.ReceiveMessageRequest, context: Any) -> int:
    s = broker.settings
    poll = (
        _duration_ms(request.long_polling_timeout)
        if request.HasField("long_polling_timeout")
        else s.default_long_polling_ms
    )
    poll = min(max(poll, 0), s.max_long_polling_ms)
    # The margin keeps the answer ahead of the client's gRPC deadline (as the proxy's reserve time);
    # it is not taken off the requested poll itself: a 1 s poll minus a 1 s margin would be no long
    # poll at all, and the consumer would spin on empty receives.
    remaining = context.time_remaining()
    if remaining is not None:
        poll = min(poll, max(int(remaining * 1000) - s.long_polling_margin_ms, 0))
    return _now_ms() + poll


async def receive_message(
    broker: Broker, request: svc.ReceiveMessageRequest, context: Any, header_ns: str
) -> AsyncIterator[svc.ReceiveMessageResponse | Encoded]:
    """Stream {status}, messages..., {delivery_timestamp}; MESSAGE_NOT_FOUND when the poll times out.

    The messages go out already serialized (:class:`~dataplane.buffered_stream.Encoded`)."""
    try:
        _, group_name = resolve(request.group, header_ns, kind="group")
        ns, topic_name = resolve(request.message_queue.topic, header_ns)
        topic = broker.topic(topic_name)
        group = broker.group(group_name)
        client_id = header(call_metadata(context), CLIENT_ID_HEADER)
        session = broker.clients.get(client_id)
        if session is not None and session.group != group_name:  # a consumer without Telemetry
            session.group, session.namespace = group_name, ns
            session.topics.add(topic_name)
        if group.broadcast:  # every member gets every message: one POP position per client
            member = client_id or context.peer()
            group = dataclasses.replace(group, name=f"{group.name}{BROADCAST_SEP}{member}")
            assert broker.pop is not None
            broker.pop.touch(group.name, topic_name)  # idle members are dropped after a while
        flt = compile_filter(request.filter_expression if request.HasField("filter_expression") else None)
        s = broker.settings
        invisible_ms = (
            _duration_ms(request.invisible_duration)
            if request.HasField("invisible_duration")
            else s.default_invisible_ms
        )
        if not 1000 <= invisible_ms <= s.max_invisible_ms:
            raise IllegalInvisibleTime(f"invisible duration must be 1 s..{s.max_invisible_ms // 1000} s")
        batch = request.batch_size or 32
        if not 1 <= batch <= s.max_receive_batch:
            raise BadRequest(f"batch_size must be 1..{s.max_receive_batch}")
        deadline = _poll_deadline_ms(broker, request, context)
        popped: list[_Popped] = []
        takes_all = flt.tags is None and flt.sql is None
        wake: int | None = None  # the wake that reached this receive, until it is handed on
        attempt = (group.name, topic_name, request.attempt_id) if request.attempt_id else None
        if attempt is not None:  # a retry gets what its lost try took (dataplane/receive_attempts.py)
            assert broker.pop is not None
            with broker.pop.batch():
                popped = _replay(broker, attempt, invisible_ms)
        while not popped and not broker.closing:
            parked = broker.waiter(topic_name, group.name)
            try:
                dlq: list[Any] = []
                assert broker.pop is not None
                try:
                    with broker.pop.batch():
                        popped = _try_pop(
                            broker, group, topic_name, topic.queue_count, flt, batch, invisible_ms, dlq
                        )
                    if popped and attempt is not None:
                        broker.attempts.remember(
                            attempt, [(i.stored.queue_id, i.entry[OFFSET], i.entry[NONCE]) for i in popped]
                        )
                finally:
                    # Other members of the group may find what this one did not take.
                    if wake is not None and (not popped or len(popped) >= batch or not takes_all):
                        broker.pass_wake(parked, wake)
                    wake = None
                for stored, attempts in dlq:
                    await _to_dlq(broker, group.name, stored, attempts, why="out of delivery attempts")
                if popped:
                    break
                now = _now_ms()
                if now >= deadline:
                    break
                wait_ms = deadline - now
                next_due = broker.pop.next_due_ms(group.name, topic_name) if broker.pop else None
                if next_due is not None:
                    wait_ms = min(wait_ms, max(next_due - now, 5))
                with contextlib.suppress(TimeoutError):
                    wake = await asyncio.wait_for(parked.future, wait_ms / 1000)
            finally:
                broker.drop_waiter(parked)
                reached = parked.future
                if wake is None and reached.done() and not reached.cancelled():
                    # a wake came while this receive was busy and it leaves now: hand it on
                    broker.pass_wake(parked, reached.result())
    except BrokerError as exc:
        yield svc.ReceiveMessageResponse(status=status_of(exc))
        yield svc.ReceiveMessageResponse(delivery_timestamp=_ts(_now_ms()))
        return
    if not popped:
        yield svc.ReceiveMessageResponse(
            status=pb.Status(code=pb.Code.MESSAGE_NOT_FOUND, message="no new message")
        )
        yield svc.ReceiveMessageResponse(delivery_timestamp=_ts(_now_ms()))
        return
    taken = time.perf_counter()
    yield svc.ReceiveMessageResponse(status=OK_STATUS)
    echo = pb.Resource(resource_namespace=ns, name=request.message_queue.topic.name)
    store_host = broker.settings.advertise or broker.settings.listen
    encode = broker.receipts.encode_parts
    group_name = group.name
    tracer = broker.tracer
    if tracer.enabled:
        tracer.record_many(
            [(item.stored.properties.get(p.P_UNIQ, ""), item.attempt) for item in popped],
            topic_name,
            "delivered",
            group=base_group(group_name),
            client_id=client_id,
        )
    TRAFFIC_OUT.add(topic_name, len(popped), sum(len(item.stored.body) for item in popped))
    topic_wire = echo.SerializeToString()
    encode_message = encode_received
    for item in popped:
        stored = item.stored
        entry = item.entry
        until = entry[UNTIL]
        handle = encode(group_name, topic_name, stored.queue_id, stored.queue_offset, entry[NONCE], until)
        data = encode_message(stored, topic_wire, store_host, handle, item.attempt, invisible_ms)
        yield Encoded(data, len(stored.body))
    yield svc.ReceiveMessageResponse(delivery_timestamp=_ts(_now_ms()))
    # Reached once the whole stream was handed over (not when the call was cancelled on the way:
    # then the messages come back when their invisible time runs out, as for any receive).
    _WRITE.observe(time.perf_counter() - taken)
    if request.auto_renew and client_id:  # a push consumer: kept invisible while it is connected
        _register_renewals(broker, group.name, topic_name, client_id, popped)


def _replay(broker: Broker, attempt: AttemptKey, invisible_ms: int) -> list[_Popped]:
    """The messages the receive of ``attempt`` took that are still in flight under that delivery,
    delivered again (same attempt number and nonce, a new invisible time)."""
    group, topic, _ = attempt
    pop = broker.pop
    assert pop is not None
    now = _now_ms()
    out: list[_Popped] = []
    for queue_id, offset, nonce in broker.attempts.recall(attempt):
        entry = pop.lookup(group, topic, queue_id, offset, nonce)
        if entry is None or entry[WAITING]:  # acked, nacked or redelivered since
            continue
        stored = _fetch_one(broker, topic, queue_id, offset)
        if stored is None:  # removed by retention
            continue
        fresh = pop.extend(group, topic, queue_id, entry, now + invisible_ms)
        out.append(_Popped(stored, fresh, entry[ATTEMPT]))
    return out


def _register_renewals(broker: Broker, group: str, topic: str, client_id: str, popped: list[_Popped]) -> None:
    now = _now_ms()
    ahead = broker.settings.auto_renew_ahead_ms
    add = broker.renewals.add
    for item in popped:
        entry = item.entry
        key = (group, topic, item.stored.queue_id, entry[OFFSET])
        add(key, Renewal(entry[NONCE], client_id, now, entry[UNTIL] - ahead))


def _checked_handle(broker: Broker, text: str, group: str, topic: str) -> tuple[ReceiptHandle, InFlight]:
    handle = broker.receipts.decode(text)
    # (a broadcast member's POP group is "{group}@{client}": base_group only when it is not the group)
    if handle.topic != topic or (handle.group != group and base_group(handle.group) != group):
        raise InvalidReceiptHandle("receipt handle belongs to another group or topic")
    assert broker.pop is not None
    entry = broker.pop.lookup(handle.group, handle.topic, handle.queue_id, handle.offset, handle.nonce)
    if entry is None:
        raise InvalidReceiptHandle("receipt handle is stale (acked, renewed or redelivered)")
    return handle, entry


def _group_and_topic(
    broker: Broker, group: pb.Resource, topic: pb.Resource, header_ns: str
) -> tuple[str, str]:
    _, g = resolve(group, header_ns, kind="group")
    _, t = resolve(topic, header_ns)
    return g, t


# ack_checked(raw request, mac, group, topic, positions, OK status) -> ({queue id: [offsets]},
# [(message id, attempt)], answer bytes), or None: the checks of ack_message's loop done from the
# request's bytes by compiled code, for a request whose every entry may be acked (dataplane/_v2_codec.c).
# It changes nothing; anything else (a refused entry, a broadcast member's handle) goes through the
# loop below, the reference, which answers each entry with its own status.
_ack_checked = _v2_codec.ack_checked if _v2_codec is not None else None
_OK_STATUS_BYTES = OK_STATUS.SerializeToString()


def _ack_all(
    broker: Broker,
    group: str,
    topic: str,
    per_queue: dict[tuple[str, int], list[int]],
    acked: list[tuple[str, int]],
) -> None:
    """Ack checked entries, (POP group, queue id) -> offsets; ``acked``: (message id, attempt) to trace."""
    pop = broker.pop
    assert pop is not None
    wake = False
    renewals = broker.renewals
    with pop.batch():
        for (pop_group, queue_id), offsets in per_queue.items():
            wake = pop.ack_many(pop_group, topic, queue_id, offsets) or wake
            if renewals:  # push consumers' messages: no longer renewed
                for offset in offsets:
                    renewals.discard((pop_group, topic, queue_id, offset))
    broker.tracer.record_many(acked, topic, "acked", group=group)
    if wake:  # a FIFO message group became free: its held message can go to a waiting receive
        broker.wake(topic)


def ack_message(broker: Broker, request: svc.AckMessageRequest, header_ns: str) -> svc.AckMessageResponse:
    """Ack each entry; the top-level status is the single entry's (or MULTIPLE_RESULTS if mixed)."""
    group, topic = _group_and_topic(broker, request.group, request.topic, header_ns)
    if not request.entries:
        raise BadRequest("no entries to ack")
    if len(request.entries) > 1024:
        raise BadRequest("at most 1024 entries per ack")
    pop = broker.pop
    assert pop is not None
    if _ack_checked is not None:
        checked = _ack_checked(
            request_bytes(request), broker.receipts.mac, group, topic, pop.positions(), _OK_STATUS_BYTES
        )
        if checked is not None:  # every entry may be acked: the usual request
            by_queue, acked_ids, answer = checked
            _ack_all(
                broker, group, topic, {(group, q): offsets for q, offsets in by_queue.items()}, acked_ids
            )
            return svc.AckMessageResponse.FromString(answer)
    response = svc.AckMessageResponse()
    results = response.entries
    acked: list[tuple[str, int]] = []  # (message id, attempt) for the trace
    per_queue: dict[tuple[str, int], list[int]] = {}  # (POP group, queue id) -> offsets to ack
    seen: set[tuple[str, int, int]] = set()
    refused: list[pb.Status] = []  # the top-level status is worked out from these alone
    for entry in request.entries:
        message_id = entry.message_id  # each field read once: every read builds a new str
        receipt_handle = entry.receipt_handle
        result = results.add()  # built in place: no copy of each entry into the response
        result.message_id = message_id
        result.receipt_handle = receipt_handle
        try:
            handle, in_flight = _checked_handle(broker, receipt_handle, group, topic)
            where = (handle.group, handle.queue_id, handle.offset)
            if where in seen:  # twice in one request: the second finds it acked, as one by one
                raise InvalidReceiptHandle("receipt handle is stale (acked, renewed or redelivered)")
            seen.add(where)
            queue = (handle.group, handle.queue_id)
            offsets = per_queue.get(queue)
            if offsets is None:
                per_queue[queue] = [handle.offset]
            else:
                offsets.append(handle.offset)
            acked.append((message_id, in_flight[ATTEMPT]))
            result.status.CopyFrom(OK_STATUS)
        except BrokerError as exc:
            status = status_of(exc)
            refused.append(status)
            result.status.CopyFrom(status)
    _ack_all(broker, group, topic, per_queue, acked)
    if not refused:
        top = OK_STATUS
    elif len(results) == 1 or (len(refused) == len(results) and len({r.code for r in refused}) == 1):
        top = refused[0]
    else:
        top = pb.Status(code=pb.Code.MULTIPLE_RESULTS, message="some entries failed")
    response.status.CopyFrom(top)
    return response


def change_invisible_duration(
    broker: Broker, request: svc.ChangeInvisibleDurationRequest, header_ns: str
) -> svc.ChangeInvisibleDurationResponse:
    group, topic = _group_and_topic(broker, request.group, request.topic, header_ns)
    invisible_ms = _duration_ms(request.invisible_duration)
    if not 0 <= invisible_ms <= broker.settings.max_invisible_ms:
        raise IllegalInvisibleTime(
            f"invisible duration must be 0..{broker.settings.max_invisible_ms // 1000} s"
        )
    handle, entry = _checked_handle(broker, request.receipt_handle, group, topic)
    assert broker.pop is not None
    until = _now_ms() + invisible_ms
    pos = broker.pop.position(handle.group, topic, handle.queue_id)
    # A shorter invisibility is a nack (the client's retry backoff); a longer one a renewal. Either
    # way, when it runs out the message comes again at once (the client chose the wait).
    nack = until < entry[UNTIL]
    fresh = broker.pop.deliver(
        handle.group,
        topic,
        handle.queue_id,
        handle.offset,
        entry[ATTEMPT],
        until,
        pos.next_offset,
        waiting=True,
    )
    new_handle = broker.receipts.encode(
        ReceiptHandle(handle.group, topic, handle.queue_id, handle.offset, fresh[NONCE], until)
    )
    broker.tracer.record(
        request.message_id,
        topic,
        "nacked" if nack else "invisible_changed",
        group=group,
        attempt=entry[ATTEMPT],
        detail=f"invisible for {invisible_ms} ms",
    )
    if invisible_ms == 0:
        broker.wake(topic)
    return svc.ChangeInvisibleDurationResponse(status=ok_status(), receipt_handle=new_handle)


async def forward_to_dlq(
    broker: Broker, request: svc.ForwardMessageToDeadLetterQueueRequest, header_ns: str
) -> svc.ForwardMessageToDeadLetterQueueResponse:
    group, topic = _group_and_topic(broker, request.group, request.topic, header_ns)
    handle, entry = _checked_handle(broker, request.receipt_handle, group, topic)
    stored = _fetch_one(broker, topic, handle.queue_id, handle.offset)
    assert broker.pop is not None
    wake = broker.pop.ack(handle.group, topic, handle.queue_id, handle.offset)
    if stored is not None:
        await _to_dlq(broker, group, stored, entry[ATTEMPT], why="forwarded by the consumer")
    if wake:
        broker.wake(topic)
    return svc.ForwardMessageToDeadLetterQueueResponse(status=ok_status())
