"""SendMessage: validation, message-type checks, and the store write."""

from __future__ import annotations

import ipaddress
import time
from itertools import repeat
from typing import Any

from dataplane import ha_writes
from dataplane.broker import Broker
from dataplane.buffered_stream import Encoded
from dataplane.errors import (
    OK_STATUS,
    BadRequest,
    BodyEmpty,
    BodyTooLarge,
    BrokerError,
    IllegalMessageKey,
    IllegalMessageTag,
    IllegalPropertyKey,
    InternalError,
    NotImplementedYet,
    PropertyConflictWithType,
    status_of,
)
from dataplane.metadata import TopicType
from dataplane.metrics import TRAFFIC_IN
from dataplane.names import resolve
from dataplane.services.route import ACCEPT as _ACCEPT
from dataplane.store.message import MessageToStore
from dataplane.store.status import PutMessageStatus
from dataplane.timer import P_DELIVER_MS, TIMER_TOPIC, InvalidRecallHandle, RecallTooLate, to_timer_message
from dataplane.transaction import HALF_TOPIC, to_half_message
from dataplane.wire import request_bytes
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = (
    "BUILDER",
    "STORE_PROPERTY_NAMES",
    "SYSTEM_PROPERTY_KEYS",
    "build_message",
    "parse_peer",
    "recall_message",
    "send_message",
    "send_summary",
)

# Store property names for v2 system properties (RocketMQ's where one exists).
P_TAGS, P_KEYS, P_UNIQ = "TAGS", "KEYS", "UNIQ_KEY"
P_TYPE = "__MQ_TYPE"
P_GROUP = "__SHARDINGKEY"
P_BORN_HOST = "__MQ_BORN_HOST"
P_TRACE = "__MQ_TRACE"
P_ENCODING = "__MQ_ENCODING"
P_NS = "__MQ_NS"
P_DLQ_TOPIC = "__MQ_DLQ_ORIGIN_TOPIC"
SYSTEM_PROPERTY_KEYS = frozenset(
    {
        P_TAGS,
        P_KEYS,
        P_UNIQ,
        P_TYPE,
        P_GROUP,
        P_BORN_HOST,
        P_TRACE,
        P_ENCODING,
        P_NS,
        P_DLQ_TOPIC,
        "DELAY",
        "TRAN_MSG",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "__STARTDELIVERTIME",
        "ORIGIN_MESSAGE_ID",
    }
)

# The store property names of the system properties, as the compiled codec (dataplane/_v2_codec.c)
# is told them: it writes them when sending and reads them when receiving.
STORE_PROPERTY_NAMES = {
    "tags": P_TAGS,
    "keys": P_KEYS,
    "uniq": P_UNIQ,
    "type": P_TYPE,
    "group": P_GROUP,
    "born_host": P_BORN_HOST,
    "trace": P_TRACE,
    "encoding": P_ENCODING,
    "ns": P_NS,
    "deliver_ms": P_DELIVER_MS,
    "dlq_topic": P_DLQ_TOPIC,
}


class IllegalDeliveryTime(BrokerError):
    code = pb.Code.ILLEGAL_DELIVERY_TIME


class RecallNotFound(BrokerError):
    code = pb.Code.NOT_FOUND


_peers: dict[str, tuple[str, int]] = {}


def parse_peer(peer: str) -> tuple[str, int]:
    """gRPC peer ("ipv4:1.2.3.4:5") to an IPv4 (host, port) the store can encode (memoized)."""
    hit = _peers.get(peer)
    if hit is None:
        if len(_peers) >= 10_000:
            _peers.clear()
        hit = _peers[peer] = _parse_peer(peer)
    return hit


def _parse_peer(peer: str) -> tuple[str, int]:
    kind, _, rest = peer.partition(":")
    host, _, port = rest.rpartition(":")
    if kind == "ipv4":
        try:
            ipaddress.IPv4Address(host)
            return host, int(port)
        except ValueError:
            pass
    return "0.0.0.0", 0


def _check_text(value: str, what: str, error: type[BrokerError], limit: int) -> None:
    if (
        not value
        or len(value) > limit
        or "\x00" in value
        or "\x01" in value
        or "\x02" in value
        or value != value.strip()
    ):
        raise error(f"illegal {what} {value[:64]!r}")


def _has_forbidden(value: str) -> bool:
    return "\x00" in value or "\x01" in value or "\x02" in value


# Enum values as plain ints: EnumTypeWrapper.__getattr__ costs a Python call per lookup.
_MT_UNSPECIFIED = int(pb.MessageType.MESSAGE_TYPE_UNSPECIFIED)
_MT_NORMAL = int(pb.MessageType.NORMAL)
_MT_FIFO = int(pb.MessageType.FIFO)
_MT_DELAY = int(pb.MessageType.DELAY)
_MT_TRANSACTION = int(pb.MessageType.TRANSACTION)
_ENC_GZIP = int(pb.Encoding.GZIP)
_TYPE_STR = {t: str(t) for t in (_MT_NORMAL, _MT_FIFO, _MT_DELAY, _MT_TRANSACTION)}
_STORABLE_TOPIC_TYPES = (TopicType.NORMAL, TopicType.FIFO, TopicType.MIXED)
_OK_ENTRY = svc.SendResultEntry(status=OK_STATUS)
_OK_STATUS_BYTES = OK_STATUS.SerializeToString()


_MESSAGE_TYPES = frozenset(pb.MessageType.values())


def _message_type(sp: pb.SystemProperties) -> int:
    mtype = sp.message_type
    if mtype != _MT_UNSPECIFIED:
        if mtype not in _MESSAGE_TYPES:  # proto3 enums are open: any int32 arrives as it was sent
            raise BadRequest(f"unknown message_type {mtype}")
        return mtype
    if sp.HasField("message_group"):
        return _MT_FIFO
    if sp.HasField("delivery_timestamp"):
        return _MT_DELAY
    return _MT_NORMAL


# (namespace, qualified name) per (resource_namespace, name, header namespace): resolve() runs two
# regexes; names repeat on every request. Bounded: cleared when it grows past _RESOLVED_MAX.
_resolved: dict[tuple[str, str, str], tuple[str, str]] = {}
_RESOLVED_MAX = 10_000


def _resolve_topic(resource: pb.Resource, header_ns: str) -> tuple[str, str]:
    key = (resource.resource_namespace, resource.name, header_ns)
    hit = _resolved.get(key)
    if hit is None:
        hit = resolve(resource, header_ns)
        if len(_resolved) >= _RESOLVED_MAX:
            _resolved.clear()
        _resolved[key] = hit
    return hit


# build_sent(raw request, ...) -> (MessageToStore list, message ids) or None: the usual request (every
# message a valid NORMAL or FIFO message of the first message's topic) read from its serialized form
# by compiled code, a small part of what build_message costs per message; anything else is None and
# goes through build_message, the reference, which builds it or says why not. BUILDER says which runs.
try:
    from dataplane import _v2_codec  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - no compiler where the broker was built
    _v2_codec = None

if _v2_codec is not None:
    # True: build_sent fills MessageToStore's slots itself rather than running its __init__
    FILLS_SLOTS: bool = _v2_codec.configure_send(MessageToStore, SYSTEM_PROPERTY_KEYS, STORE_PROPERTY_NAMES)
    _build_sent = _v2_codec.build_sent
    _send_sizes = _v2_codec.send_sizes
    _encode_sent = _v2_codec.encode_sent
    BUILDER = "compiled"
else:  # pragma: no cover
    _build_sent = _send_sizes = _encode_sent = None
    FILLS_SLOTS = False
    BUILDER = "python"


def build_compiled(
    broker: Broker, request: svc.SendMessageRequest, header_ns: str, peer: tuple[str, int]
) -> tuple[list[MessageToStore], list[str]] | None:
    """Every message of ``request`` as build_message builds it, and their ids; None when any message
    is not for the compiled builder (or it is not built): build them one by one then."""
    if _build_sent is None:
        return None
    resource = request.messages[0].topic
    try:
        ns, qualified = _resolve_topic(resource, header_ns)
        topic = broker.topic(qualified)
    except BrokerError:
        return None
    topic_type = topic.message_type
    storable = topic_type in _STORABLE_TOPIC_TYPES
    accept_normal = storable and _MT_NORMAL in _ACCEPT[topic_type]
    accept_fifo = storable and _MT_FIFO in _ACCEPT[topic_type]
    if not (accept_normal or accept_fifo):  # a DELAY or TRANSACTION topic: nothing to read for
        return None
    s = broker.settings
    built: tuple[list[MessageToStore], list[str]] | None = _build_sent(
        request_bytes(request),
        resource.resource_namespace,
        resource.name,
        ns,
        qualified,
        topic.max_message_bytes or s.max_body_bytes,
        topic.queue_count,
        accept_normal,
        accept_fifo,
        s.max_properties,
        s.max_tag_length,
        s.max_keys,
        peer,
        _round_robin,
    )
    return built


def send_summary(
    request: svc.SendMessageRequest, header_ns: str
) -> tuple[dict[tuple[str, str], list[int]], list[tuple[str, str]]]:
    """What the interceptor reads of a SendMessage before the handler runs, from the request's bytes:
    (namespace, topic as named) -> body sizes of its messages (the totals quotas and metering take;
    the order within a topic is not kept), and the topics as named (resource namespace, name), one per
    run of consecutive messages to the same topic (what the access check reads: a run names one
    resource, so checking it once decides as checking each of its messages)."""
    compiled = _send_sizes(request_bytes(request)) if _send_sizes is not None else None
    if compiled is None:  # the loop that _v2_codec.send_sizes does from the bytes (the reference)
        by_resource: dict[tuple[str, str], list[int]] = {}
        runs: list[tuple[str, str]] = []
        for message in request.messages:
            named = (message.topic.resource_namespace, message.topic.name)
            if not runs or runs[-1] != named:
                runs.append(named)
            by_resource.setdefault(named, []).append(len(message.body))
    else:
        by_resource, runs = compiled
    sizes: dict[tuple[str, str], list[int]] = {}
    for (resource_ns, name), per_resource in by_resource.items():
        key = (resource_ns or header_ns, name)
        if key in sizes:  # named both with and without the header's namespace
            sizes[key] = sizes[key] + per_resource
        else:
            sizes[key] = per_resource
    return sizes, runs


def build_message(
    broker: Broker,
    message: pb.Message,
    header_ns: str,
    peer: tuple[str, int],
    topics: dict[tuple[str, str], Any] | None = None,
) -> tuple[Any, int]:
    """Validate one v2 message and turn it into a MessageToStore; returns (message, body size).

    ``topics`` (optional) caches ``(ns, qualified) -> TopicConfig`` across the messages of a request.
    """
    s = broker.settings
    ns, qualified = _resolve_topic(message.topic, header_ns)
    topic = topics.get((ns, qualified)) if topics is not None else None
    if topic is None:
        topic = broker.topic(qualified)
        if topics is not None:
            topics[(ns, qualified)] = topic
    limit = topic.max_message_bytes or s.max_body_bytes
    body = message.body
    size = len(body)
    if not size:
        raise BodyEmpty("message body is empty")
    if size > limit:
        raise BodyTooLarge(f"message body is {size} bytes; the limit is {limit}")
    sp = message.system_properties
    message_id = sp.message_id
    if not message_id or len(message_id) > 128 or _has_forbidden(message_id):
        raise BadRequest("message_id is required (at most 128 characters)")
    mtype = _message_type(sp)
    topic_type = topic.message_type
    if mtype not in _ACCEPT[topic_type]:
        raise PropertyConflictWithType(
            f"topic {qualified!r} accepts {topic_type.value} messages, not {pb.MessageType.Name(mtype)}"  # type: ignore[arg-type]
        )
    message_group = sp.message_group
    has_group = sp.HasField("message_group")
    if mtype == _MT_FIFO and not message_group:
        raise PropertyConflictWithType("FIFO messages need a message_group")
    if mtype != _MT_FIFO and has_group:
        raise PropertyConflictWithType("only FIFO messages may carry a message_group")
    deliver_ms = -1
    if mtype == _MT_DELAY or sp.HasField("delivery_timestamp"):
        deliver_ms = _delivery_time(broker, sp, mtype)
    if mtype == _MT_TRANSACTION and broker.transactions is None:
        raise NotImplementedYet("transactional messages need the commitlog store engine")
    if (
        topic_type not in _STORABLE_TOPIC_TYPES
        and not (deliver_ms >= 0 and topic_type is TopicType.DELAY)
        and not (mtype == _MT_TRANSACTION and topic_type is TopicType.TRANSACTION)
    ):
        raise PropertyConflictWithType(f"topic {qualified!r} does not accept {pb.MessageType.Name(mtype)}")  # type: ignore[arg-type]
    properties: dict[str, str] = {}
    user_properties = message.user_properties
    if user_properties:
        if len(user_properties) > s.max_properties:
            raise IllegalPropertyKey(f"at most {s.max_properties} user properties")
        for key, value in user_properties.items():
            _check_text(key, "property key", IllegalPropertyKey, 256)
            if key in SYSTEM_PROPERTY_KEYS or key.startswith("__MQ_"):
                raise IllegalPropertyKey(f"property key {key!r} is reserved")
            if len(value) > 16384 or _has_forbidden(value):
                raise IllegalPropertyKey(f"illegal value of property {key!r}")
            properties[key] = value
    if sp.HasField("tag"):
        tag = sp.tag
        _check_text(tag, "tag", IllegalMessageTag, s.max_tag_length)
        if "|" in tag or " " in tag or tag == "*":
            raise IllegalMessageTag(f"illegal tag {tag!r}")
        properties[P_TAGS] = tag
    keys = sp.keys
    if keys:
        if len(keys) > s.max_keys:
            raise IllegalMessageKey(f"at most {s.max_keys} keys")
        for key in keys:
            _check_text(key, "key", IllegalMessageKey, 128)
            if " " in key:
                raise IllegalMessageKey(f"illegal key {key!r} (no spaces)")
        properties[P_KEYS] = " ".join(keys)
    properties[P_UNIQ] = message_id
    properties[P_TYPE] = _TYPE_STR.get(mtype) or str(mtype)
    if message_group:
        _check_text(message_group, "message group", BadRequest, 128)
        properties[P_GROUP] = message_group
    born_host = sp.born_host
    if born_host:
        properties[P_BORN_HOST] = born_host[:128].replace("\x01", "").replace("\x02", "")
    if sp.HasField("trace_context"):
        trace = sp.trace_context
        if trace:
            properties[P_TRACE] = trace[:1024].replace("\x01", "").replace("\x02", "")
    if sp.body_encoding == _ENC_GZIP:
        properties[P_ENCODING] = "GZIP"
    if ns:
        properties[P_NS] = ns
    born = sp.born_timestamp
    born_ms = born.seconds * 1000 + born.nanos // 1_000_000
    queue_id = sp.queue_id
    if not 0 <= queue_id < topic.queue_count:
        queue_id = _next_queue(broker, qualified, topic.queue_count)
    stored = MessageToStore(qualified, queue_id, body, properties, 0, 0, born_ms if born_ms > 0 else 0, peer)
    if deliver_ms >= 0:
        stored = to_timer_message(stored, deliver_ms)
    elif mtype == _MT_TRANSACTION:
        stored = to_half_message(stored)
    return stored, size


def _delivery_time(broker: Broker, sp: pb.SystemProperties, mtype: int) -> int:
    """Validated delivery time (ms) of a DELAY message; stored through the timer wheel."""
    if broker.timers is None:
        raise NotImplementedYet("delay messages need the commitlog store engine")
    if mtype != _MT_DELAY:
        raise PropertyConflictWithType("only DELAY messages may carry a delivery_timestamp")
    if not sp.HasField("delivery_timestamp"):
        raise IllegalDeliveryTime("DELAY messages need a delivery_timestamp")
    ts = sp.delivery_timestamp
    deliver_ms = ts.seconds * 1000 + ts.nanos // 1_000_000
    max_delay = broker.settings.max_delay_ms
    if deliver_ms - time.time() * 1000 > max_delay:
        raise IllegalDeliveryTime(f"delivery_timestamp is more than {max_delay} ms ahead")
    return max(deliver_ms, 0)


def _recall_handles(broker: Broker, stored: list[MessageToStore], appended: list[Any]) -> list[str]:
    """One recall handle per stored message ("" for messages that are not delayed)."""
    handles = []
    encode = broker.recalls.encode_fields
    for msg, entry in zip(stored, appended, strict=True):
        if msg.topic != TIMER_TOPIC:
            handles.append("")
            continue
        p = msg.properties
        handles.append(encode(p["REAL_TOPIC"], p[P_UNIQ], int(p["TIMER_OUT_MS"]), entry.physical_offset))
    return handles


async def recall_message(
    broker: Broker, request: svc.RecallMessageRequest, header_ns: str
) -> svc.RecallMessageResponse:
    """Cancel a pending delay message by its recall handle; NOT_FOUND once it was delivered."""
    timers = broker.timers
    if timers is None:
        raise NotImplementedYet("delay messages need the commitlog store engine")
    _, qualified = _resolve_topic(request.topic, header_ns)
    try:
        handle = broker.recalls.decode(request.recall_handle)
    except InvalidRecallHandle as exc:
        raise BadRequest(f"invalid recall handle: {exc}") from exc
    if handle.topic != qualified:
        raise BadRequest("the recall handle belongs to another topic")
    try:
        await timers.recall_async(handle)
    except RecallTooLate as exc:
        raise RecallNotFound(str(exc)) from exc
    return svc.RecallMessageResponse(status=OK_STATUS, message_id=handle.message_id)


async def _put_halves(broker: Broker, to_store: list[MessageToStore]) -> Any:
    """Put a batch holding half messages; the check service keeps its offsets until they are registered."""
    transactions = broker.transactions
    assert transactions is not None
    transactions.preparing += 1
    try:
        return await broker.store.put_messages_async(to_store)
    finally:
        transactions.preparing -= 1


def _transaction_ids(broker: Broker, stored: list[MessageToStore], appended: list[Any]) -> list[str]:
    """Register the stored half messages; one transaction id per message ("" for the others)."""
    transactions = broker.transactions
    assert transactions is not None
    return [
        transactions.on_prepared(msg, entry) if msg.topic == HALF_TOPIC else ""
        for msg, entry in zip(stored, appended, strict=True)
    ]


_round_robin: dict[str, int] = {}


def _next_queue(broker: Broker, topic: str, count: int) -> int:
    n = _round_robin.get(topic, 0)
    _round_robin[topic] = n + 1
    return n % count


class SentAnswer(Encoded):
    """A SendMessageResponse that stored every message, in its wire form (the server registers
    SendMessage among ``ENCODED_ANSWERS``); ``status`` is its top-level status, as the metering
    interceptor reads it."""

    __slots__ = ()
    status: pb.Status = OK_STATUS

    def __init__(self, data: bytes) -> None:
        super().__init__(data, 0)


def as_response(answer: svc.SendMessageResponse | SentAnswer) -> svc.SendMessageResponse:
    """:func:`send_message`'s answer as a protobuf, for in-process callers that read it."""
    if isinstance(answer, SentAnswer):
        return svc.SendMessageResponse.FromString(answer.data)
    return answer


async def send_message(
    broker: Broker, request: svc.SendMessageRequest, header_ns: str, peer: str
) -> svc.SendMessageResponse | SentAnswer:
    """Store every valid message; each entry carries its own status, the top level the first failure."""
    messages = request.messages
    if not messages:
        raise BadRequest("no messages in the request")
    if len(messages) > broker.settings.max_batch_messages:
        raise BadRequest(f"at most {broker.settings.max_batch_messages} messages per request")
    born = parse_peer(peer)
    topics: dict[tuple[str, str], Any] = {}
    # per message: (message id, MessageToStore or the failure Status)
    built: list[tuple[str, Any]] = []
    to_store: list[MessageToStore] = []
    failed = 0
    delayed = False
    handles: Any = None
    halves = 0
    # the usual request is built at once by compiled code; any other message by message
    compiled = build_compiled(broker, request, header_ns, born)
    if compiled is not None:
        to_store, ids = compiled
        built = list(zip(ids, to_store, strict=True))
    for message in messages if compiled is None else ():
        try:
            stored = build_message(broker, message, header_ns, born, topics)[0]
            to_store.append(stored)
            delayed = delayed or stored.topic == TIMER_TOPIC
            halves += stored.topic == HALF_TOPIC
            built.append((stored.properties[P_UNIQ], stored))
        except BrokerError as exc:
            built.append((message.system_properties.message_id, status_of(exc)))
            failed += 1
    entry_cls = svc.SendResultEntry
    if to_store:
        replicas = ha_writes.before_put(broker, to_store) if broker.ha is not None else 0
        if halves:
            result = await _put_halves(broker, to_store)
        else:
            result = await broker.store.put_messages_async(to_store)
        if delayed and broker.timers is not None and result.status is PutMessageStatus.PUT_OK:
            broker.timers.accepted(to_store, result.entries)  # timer log + wheel, no read-back
        if broker.ha is not None and result.status is PutMessageStatus.PUT_OK:
            result = await ha_writes.after_put(broker, result, replicas)
        if result.status is not PutMessageStatus.PUT_OK:
            ha_err = ha_writes.failure_status(result.status) if broker.ha is not None else None
            if ha_err is not None:
                err = ha_err
            elif result.status == PutMessageStatus.FLUSH_DISK_TIMEOUT:
                err = pb.Status(code=pb.Code.MASTER_PERSISTENCE_TIMEOUT, message="flush to disk timed out")
            elif result.status == PutMessageStatus.DISK_FULL:
                err = pb.Status(
                    code=pb.Code.INTERNAL_SERVER_ERROR,
                    message="broker disk is full: message not stored, retry later or on another broker",
                )
            else:
                err = status_of(InternalError(f"store refused the messages: {result.status}"))
            built = [(mid, err if type(item) is MessageToStore else item) for mid, item in built]
            failed = len(built)
        else:
            _count_in(to_store)  # the trace's "stored" event is read from the store (trace.py)
            if delayed:
                handles = iter(_recall_handles(broker, to_store, result.entries))
            tx_ids = iter(_transaction_ids(broker, to_store, result.entries) if halves else ())
            if not failed and not delayed and not halves and _encode_sent is not None:
                # the usual answer, written by compiled code and sent as it is: cheaper than
                # _ok_response, and than parsing it for grpc to serialize it again
                return SentAnswer(_encode_sent(_OK_STATUS_BYTES, built, result.entries))
            if not failed:
                response = _ok_response(built, result.entries)
                ok_entries = response.entries
                if delayed:
                    for entry in ok_entries:
                        entry.recall_handle = next(handles)
                if halves:
                    for entry in ok_entries:
                        entry.transaction_id = next(tx_ids)
                return response
            offsets = iter(result.entries)
            built = [
                (mid, next(offsets).queue_offset if type(item) is MessageToStore else item)
                for mid, item in built
            ]
    entries = []
    first_failure: pb.Status | None = None
    for mid, item in built:
        if type(item) is int:
            entries.append(entry_cls(message_id=mid, status=OK_STATUS, offset=item))
            if delayed:
                entries[-1].recall_handle = next(handles)
            if halves:
                entries[-1].transaction_id = next(tx_ids)
        else:
            entries.append(entry_cls(message_id=mid, status=item))
            if first_failure is None:
                first_failure = item
    if first_failure is None:
        top = OK_STATUS
    elif failed == len(entries):
        top = first_failure
    else:
        top = pb.Status(code=pb.Code.MULTIPLE_RESULTS, message="some messages failed; see entries")
    return svc.SendMessageResponse(status=top, entries=entries)


def _ok_response(built: list[tuple[str, Any]], appended: list[Any]) -> svc.SendMessageResponse:
    """The answer to a request stored whole: each entry OK with its message id and queue offset.

    Copies of one OK entry, then two scalar fields each: cheaper than building an entry and its
    status from keywords per message. The reference of the compiled ``encode_sent``."""
    response = svc.SendMessageResponse(status=OK_STATUS)
    ok_entries = response.entries
    ok_entries.extend(repeat(_OK_ENTRY, len(built)))
    for entry, (mid, _), where in zip(ok_entries, built, appended, strict=True):
        entry.message_id = mid
        entry.offset = where.queue_offset
    return response


def _count_in(stored: list[MessageToStore]) -> None:
    """Messages/bytes in per topic: one ``labels()`` lookup per topic, not per message."""
    if len(stored) == 1:  # a single send, as the official clients make them: no generators
        only = stored[0]
        TRAFFIC_IN.add(only.topic, 1, len(only.body))
        return
    topic = stored[0].topic
    if all(m.topic == topic for m in stored):
        TRAFFIC_IN.add(topic, len(stored), sum(len(m.body) for m in stored))
        return
    per_topic: dict[str, list[int]] = {}
    for m in stored:
        acc = per_topic.get(m.topic)
        if acc is None:
            acc = per_topic[m.topic] = [0, 0]
        acc[0] += 1
        acc[1] += len(m.body)
    for name, (count, size) in per_topic.items():
        TRAFFIC_IN.add(name, count, size)
