"""SendMessage: validation, message-type checks, and the store write."""

from __future__ import annotations

import ipaddress
from typing import Any

from dataplane.broker import Broker
from dataplane.errors import (
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
    ok_status,
    status_of,
)
from dataplane.metadata import TopicType
from dataplane.metrics import BYTES_IN, MESSAGES_IN
from dataplane.names import resolve
from dataplane.services.route import accept_types
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("SYSTEM_PROPERTY_KEYS", "build_message", "parse_peer", "send_message")

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
_FORBIDDEN_CHARS = ("\x00", "\x01", "\x02")


def parse_peer(peer: str) -> tuple[str, int]:
    """gRPC peer ("ipv4:1.2.3.4:5") to an IPv4 (host, port) the store can encode."""
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
    if not value or len(value) > limit or any(c in value for c in _FORBIDDEN_CHARS) or value != value.strip():
        raise error(f"illegal {what} {value[:64]!r}")


def _message_type(sp: pb.SystemProperties) -> int:
    if sp.message_type != pb.MessageType.MESSAGE_TYPE_UNSPECIFIED:
        return sp.message_type
    if sp.HasField("message_group"):
        return pb.MessageType.FIFO
    if sp.HasField("delivery_timestamp"):
        return pb.MessageType.DELAY
    return pb.MessageType.NORMAL


def build_message(
    broker: Broker, message: pb.Message, header_ns: str, peer: tuple[str, int]
) -> tuple[Any, int]:
    """Validate one v2 message and turn it into a MessageToStore; returns (message, body size)."""
    from dataplane.store.message import MessageToStore

    s = broker.settings
    ns, qualified = resolve(message.topic, header_ns)
    topic = broker.topic(qualified)
    limit = topic.max_message_bytes or s.max_body_bytes
    if not message.body:
        raise BodyEmpty("message body is empty")
    if len(message.body) > limit:
        raise BodyTooLarge(f"message body is {len(message.body)} bytes; the limit is {limit}")
    sp = message.system_properties
    if not sp.message_id or len(sp.message_id) > 128 or any(c in sp.message_id for c in _FORBIDDEN_CHARS):
        raise BadRequest("message_id is required (at most 128 characters)")
    mtype = _message_type(sp)
    if mtype not in accept_types(topic):
        raise PropertyConflictWithType(
            f"topic {qualified!r} accepts {topic.message_type.value} messages, "
            f"not {pb.MessageType.Name(mtype)}"  # type: ignore[arg-type]
        )
    if mtype == pb.MessageType.FIFO and not sp.message_group:
        raise PropertyConflictWithType("FIFO messages need a message_group")
    if mtype != pb.MessageType.FIFO and sp.HasField("message_group"):
        raise PropertyConflictWithType("only FIFO messages may carry a message_group")
    if mtype == pb.MessageType.DELAY or sp.HasField("delivery_timestamp"):
        raise NotImplementedYet("delay messages are not supported by this broker yet")
    if mtype == pb.MessageType.TRANSACTION:
        raise NotImplementedYet("transactional messages are not supported by this broker yet")
    if topic.message_type not in (TopicType.NORMAL, TopicType.FIFO, TopicType.MIXED):
        raise PropertyConflictWithType(f"topic {qualified!r} does not accept {pb.MessageType.Name(mtype)}")  # type: ignore[arg-type]
    if len(message.user_properties) > s.max_properties:
        raise IllegalPropertyKey(f"at most {s.max_properties} user properties")
    properties: dict[str, str] = {}
    for key, value in message.user_properties.items():
        _check_text(key, "property key", IllegalPropertyKey, 256)
        if key in SYSTEM_PROPERTY_KEYS or key.startswith("__MQ_"):
            raise IllegalPropertyKey(f"property key {key!r} is reserved")
        if len(value) > 16384 or any(c in value for c in _FORBIDDEN_CHARS):
            raise IllegalPropertyKey(f"illegal value of property {key!r}")
        properties[key] = value
    if sp.HasField("tag"):
        _check_text(sp.tag, "tag", IllegalMessageTag, s.max_tag_length)
        if "|" in sp.tag or " " in sp.tag or sp.tag == "*":
            raise IllegalMessageTag(f"illegal tag {sp.tag!r}")
        properties[P_TAGS] = sp.tag
    if sp.keys:
        if len(sp.keys) > s.max_keys:
            raise IllegalMessageKey(f"at most {s.max_keys} keys")
        for key in sp.keys:
            _check_text(key, "key", IllegalMessageKey, 128)
            if " " in key:
                raise IllegalMessageKey(f"illegal key {key!r} (no spaces)")
        properties[P_KEYS] = " ".join(sp.keys)
    properties[P_UNIQ] = sp.message_id
    properties[P_TYPE] = str(int(mtype))
    if sp.message_group:
        _check_text(sp.message_group, "message group", BadRequest, 128)
        properties[P_GROUP] = sp.message_group
    if sp.born_host:
        properties[P_BORN_HOST] = sp.born_host[:128].replace("\x01", "").replace("\x02", "")
    if sp.HasField("trace_context") and sp.trace_context:
        properties[P_TRACE] = sp.trace_context[:1024].replace("\x01", "").replace("\x02", "")
    if sp.body_encoding == pb.Encoding.GZIP:
        properties[P_ENCODING] = "GZIP"
    if ns:
        properties[P_NS] = ns
    born_ms = sp.born_timestamp.seconds * 1000 + sp.born_timestamp.nanos // 1_000_000
    queue_id = (
        sp.queue_id
        if 0 <= sp.queue_id < topic.queue_count
        else _next_queue(broker, qualified, topic.queue_count)
    )
    return (
        MessageToStore(
            topic=qualified,
            queue_id=queue_id,
            body=bytes(message.body),
            properties=properties,
            born_timestamp=max(0, born_ms),
            born_host=peer,
        ),
        len(message.body),
    )


_round_robin: dict[str, int] = {}


def _next_queue(broker: Broker, topic: str, count: int) -> int:
    n = _round_robin.get(topic, 0)
    _round_robin[topic] = n + 1
    return n % count


async def send_message(
    broker: Broker, request: svc.SendMessageRequest, header_ns: str, peer: str
) -> svc.SendMessageResponse:
    """Store every valid message; each entry carries its own status, the top level the first failure."""
    if not request.messages:
        raise BadRequest("no messages in the request")
    if len(request.messages) > broker.settings.max_batch_messages:
        raise BadRequest(f"at most {broker.settings.max_batch_messages} messages per request")
    born = parse_peer(peer)
    entries: list[svc.SendResultEntry] = []
    to_store: list[tuple[int, Any]] = []
    for index, message in enumerate(request.messages):
        entry = svc.SendResultEntry(message_id=message.system_properties.message_id)
        try:
            to_store.append((index, build_message(broker, message, header_ns, born)[0]))
            entry.status.CopyFrom(ok_status())
        except BrokerError as exc:
            entry.status.CopyFrom(status_of(exc))
        entries.append(entry)
    if to_store:
        from dataplane.store.status import PutMessageStatus

        result = await broker.store.put_messages_async([m for _, m in to_store])
        if result.status != PutMessageStatus.PUT_OK:
            err = status_of(InternalError(f"store refused the messages: {result.status}"))
            if result.status == PutMessageStatus.FLUSH_DISK_TIMEOUT:
                err = pb.Status(code=pb.Code.MASTER_PERSISTENCE_TIMEOUT, message="flush to disk timed out")
            for index, _ in to_store:
                entries[index].status.CopyFrom(err)
        else:
            for (index, msg), appended in zip(to_store, result.entries, strict=True):
                entries[index].offset = appended.queue_offset
                MESSAGES_IN.labels(msg.topic).inc()
                BYTES_IN.labels(msg.topic).inc(len(msg.body))
    failures = [e.status for e in entries if e.status.code != pb.Code.OK]
    if not failures:
        top = ok_status()
    elif len(failures) == len(entries):
        top = failures[0]
    else:
        top = pb.Status(code=pb.Code.MULTIPLE_RESULTS, message="some messages failed; see entries")
    return svc.SendMessageResponse(status=top, entries=entries)
