"""The receive path's fast builders produce exactly what the straightforward code did.

Receipt handles issued before a broker upgrade must still verify after it, and official clients see
the same bytes for every received message, so both are pinned against reference implementations.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from dataplane.errors import InvalidReceiptHandle
from dataplane.receipt import ReceiptCodec, ReceiptHandle
from dataplane.services import produce as p
from dataplane.services.consume import P_DLQ_QUEUE, fill_v2_message, to_v2_message
from dataplane.store.message import StoredMessage
from dataplane.timer.service import P_DELIVER_MS
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

SECRET = b"s" * 32


def _reference_handle(h: ReceiptHandle) -> str:
    """The v1 handle layout, written with the standard library only (docs in dataplane/receipt.py)."""
    payload = "|".join(
        ("1", str(h.queue_id), str(h.offset), h.nonce, str(h.invisible_until_ms), h.group, h.topic)
    ).encode()
    sig = hmac.new(SECRET, payload, hashlib.sha256).digest()[:16]
    return (
        base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
        + "."
        + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()
    )


@pytest.mark.parametrize(
    "handle",
    [
        ReceiptHandle("acme%g", "acme%t", 3, 42, "00ff00ff00ff00ff", 1_700_000_000_000),
        ReceiptHandle("g@client-1", "%RETRY%acme%g", 0, 0, "a", 1),  # padding lengths differ
        ReceiptHandle("ns%gröup", "ns%tópic", 7, 2**40, "deadbeefdeadbeef", 9_999_999_999_999),
    ],
)
def test_receipt_handles_keep_the_v1_layout(handle: ReceiptHandle) -> None:
    codec = ReceiptCodec(SECRET)
    text = codec.encode(handle)
    assert text == _reference_handle(handle)
    fields = (handle.group, handle.topic, handle.queue_id, handle.offset, handle.nonce)
    assert codec.encode_parts(*fields, handle.invisible_until_ms) == text
    assert codec.decode(_reference_handle(handle)) == handle
    body, sig = text.split(".")
    with pytest.raises(InvalidReceiptHandle):
        codec.decode(body + "é." + sig)  # non-ASCII is malformed, not a crash


def _stored(properties: dict[str, str], body: bytes = b"payload-\x00\xff" * 50) -> StoredMessage:
    return StoredMessage(
        "acme%orders", 5, 1234, 987_654, body, properties, 1_732_480_000_123, 1_732_480_000_007,
        ("10.0.0.9", 40_000), ("127.0.0.1", 8081), 2, 0, 0, 0, 1300, 0,
    )  # fmt: skip


def _reference_message(stored: StoredMessage, topic: pb.Resource, handle: str, attempt: int) -> pb.Message:
    """What the broker sent before the in-place builder: every field through the constructors."""
    get = stored.properties.get
    mtype = get(p.P_TYPE)
    sp = pb.SystemProperties(
        message_id=get(p.P_UNIQ) or stored.msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(stored.body).hexdigest().upper()),
        body_encoding=pb.GZIP if get(p.P_ENCODING) == "GZIP" else pb.IDENTITY,
        message_type=int(mtype) if mtype is not None else pb.NORMAL,  # type: ignore[arg-type]
        born_host=get(p.P_BORN_HOST) or stored.born_host[0],
        store_host="broker:8081",
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
        receipt_handle=handle,
        delivery_attempt=attempt,
    )
    sp.born_timestamp.FromMilliseconds(stored.born_timestamp)
    sp.store_timestamp.FromMilliseconds(stored.store_timestamp)
    sp.invisible_duration.FromMilliseconds(30_500)
    if get(p.P_TAGS) is not None:
        sp.tag = get(p.P_TAGS)
    if get(p.P_KEYS):
        sp.keys.extend(get(p.P_KEYS).split())
    if get(p.P_GROUP) is not None:
        sp.message_group = get(p.P_GROUP)
    if get(p.P_TRACE) is not None:
        sp.trace_context = get(p.P_TRACE)
    if get(P_DELIVER_MS) is not None:
        sp.delivery_timestamp.FromMilliseconds(int(get(P_DELIVER_MS)))
    if get(p.P_DLQ_TOPIC) is not None:
        sp.dead_letter_queue.topic = get(p.P_DLQ_TOPIC)
        sp.dead_letter_queue.message_id = sp.message_id
    user = {k: v for k, v in stored.properties.items() if k not in p.SYSTEM_PROPERTY_KEYS and k[:2] != "__"}
    return pb.Message(topic=topic, user_properties=user, system_properties=sp, body=stored.body)


@pytest.mark.parametrize(
    "properties",
    [
        {p.P_UNIQ: "ID-1", p.P_TYPE: "1", p.P_TAGS: "paid", "region": "eu", "z": ""},
        {p.P_TYPE: "2", p.P_GROUP: "customer-7", p.P_KEYS: "k1 k2", p.P_BORN_HOST: "10.1.1.1"},
        {p.P_UNIQ: "ID-3", p.P_TYPE: "3", P_DELIVER_MS: "1732480099000", p.P_ENCODING: "GZIP"},
        {p.P_UNIQ: "ID-4", p.P_TRACE: "00-abc-01", p.P_DLQ_TOPIC: "acme%orders", P_DLQ_QUEUE: "1"},
        {},  # no UNIQ_KEY: the offset message id; no type: NORMAL
    ],
)
def test_received_message_bytes_are_unchanged(properties: dict[str, str]) -> None:
    stored = _stored(properties)
    topic = pb.Resource(resource_namespace="acme", name="orders")
    expected = _reference_message(stored, topic, "handle.sig", 3)
    response = svc.ReceiveMessageResponse()
    fill_v2_message(response.message, stored, topic, "broker:8081", "handle.sig", 3, 30_500)
    # deterministic: map entries (user properties) in key order, as protobuf does not fix their order
    reference = svc.ReceiveMessageResponse(message=expected)
    assert response.SerializeToString(deterministic=True) == reference.SerializeToString(deterministic=True)
    built = to_v2_message(stored, topic, store_host="broker:8081", receipt_handle="handle.sig", attempt=3,
                          invisible_ms=30_500)  # fmt: skip
    assert built == expected
    assert "__MQ_DLQ_ORIGIN_QID" not in built.user_properties
