"""The receive path's fast builders produce exactly what the straightforward code did.

Receipt handles issued before a broker upgrade (v1) must still verify after it, and official clients see
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


def _reference_handle(h: ReceiptHandle, version: str = "2") -> str:
    """A handle of ``version``'s layout, written with the standard library only (docs in
    dataplane/receipt.py): v2 is tagged with keyed BLAKE2b, v1 with HMAC-SHA256."""
    payload = "|".join(
        (version, str(h.queue_id), str(h.offset), h.nonce, str(h.invisible_until_ms), h.group, h.topic)
    ).encode()
    if version == "1":
        tag = hmac.new(SECRET, payload, hashlib.sha256).digest()[:16]
    else:
        tag = hashlib.blake2b(payload, key=SECRET, digest_size=16).digest()
    return (
        base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
        + "."
        + base64.urlsafe_b64encode(tag).rstrip(b"=").decode()
    )


HANDLES = [
    ReceiptHandle("acme%g", "acme%t", 3, 42, "00ff00ff00ff00ff", 1_700_000_000_000),
    ReceiptHandle("g@client-1", "%RETRY%acme%g", 0, 0, "a", 1),  # padding lengths differ
    ReceiptHandle("ns%gröup", "ns%tópic", 7, 2**40, "deadbeefdeadbeef", 9_999_999_999_999),
]


@pytest.mark.parametrize("handle", HANDLES)
def test_receipt_handles_are_issued_in_the_v2_layout(handle: ReceiptHandle) -> None:
    codec = ReceiptCodec(SECRET)
    text = codec.encode(handle)
    assert text == _reference_handle(handle)
    fields = (handle.group, handle.topic, handle.queue_id, handle.offset, handle.nonce)
    assert codec.encode_parts(*fields, handle.invisible_until_ms) == text
    assert codec.decode(text) == handle
    body, sig = text.split(".")
    with pytest.raises(InvalidReceiptHandle):
        codec.decode(body + "é." + sig)  # non-ASCII is malformed, not a crash


@pytest.mark.parametrize("handle", HANDLES)
def test_v1_handles_issued_before_an_upgrade_still_verify(handle: ReceiptHandle) -> None:
    assert ReceiptCodec(SECRET).decode(_reference_handle(handle, "1")) == handle


def test_a_tag_verifies_only_under_the_algorithm_its_version_names() -> None:
    codec = ReceiptCodec(SECRET)
    handle = HANDLES[0]
    v1_body, v1_tag = _reference_handle(handle, "1").split(".")
    v2_body, v2_tag = _reference_handle(handle, "2").split(".")
    for forged in (f"{v2_body}.{v1_tag}", f"{v1_body}.{v2_tag}"):
        with pytest.raises(InvalidReceiptHandle, match="signature mismatch"):
            codec.decode(forged)
    # another version number, correctly tagged by either algorithm, is still refused
    payload = base64.urlsafe_b64decode(v2_body + "==").replace(b"2|", b"3|", 1)
    for tag in (
        hashlib.blake2b(payload, key=SECRET, digest_size=16).digest(),
        hmac.new(SECRET, payload, hashlib.sha256).digest()[:16],
    ):
        text = (
            base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
            + "."
            + base64.urlsafe_b64encode(tag).rstrip(b"=").decode()
        )
        with pytest.raises(InvalidReceiptHandle):
            codec.decode(text)


def test_secrets_longer_than_a_blake2b_key_still_sign() -> None:
    codec = ReceiptCodec(b"L" * 100)
    handle = HANDLES[1]
    assert codec.decode(codec.encode(handle)) == handle
    with pytest.raises(InvalidReceiptHandle):
        ReceiptCodec(b"L" * 99 + b"M").decode(codec.encode(handle))


def stored_message(
    properties: dict[str, str],
    body: bytes = b"payload-\x00\xff" * 50,
    *,
    queue_id: int = 5,
    queue_offset: int = 1234,
    store_ms: int = 1_732_480_000_123,
    born_ms: int = 1_732_480_000_007,
    born_host: str = "10.0.0.9",
) -> StoredMessage:
    """A record as the store reads it back (test_v2_codec.py builds its messages with it too)."""
    return StoredMessage(
        "acme%orders", queue_id, queue_offset, 987_654, body, properties, store_ms, born_ms,
        (born_host, 40_000), ("127.0.0.1", 8081), 2, 0, 0, 0, 1300, 0,
    )  # fmt: skip


def _reference_message(stored: StoredMessage, topic: pb.Resource, handle: str, attempt: int) -> pb.Message:
    """What the broker sent before the in-place builder: every field through the constructors."""
    get = stored.properties.get
    mtype = get(p.P_TYPE)
    sp = pb.SystemProperties(
        message_id=get(p.P_UNIQ) or stored.msg_id,
        body_digest=pb.Digest(type=pb.SHA1, checksum=hashlib.sha1(stored.body).hexdigest().upper()),
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


# Store properties of each kind of received message (test_v2_codec.py adds edge cases to these).
MESSAGE_KINDS = [
    {p.P_UNIQ: "ID-1", p.P_TYPE: "1", p.P_TAGS: "paid", "region": "eu", "z": ""},
    {p.P_TYPE: "2", p.P_GROUP: "customer-7", p.P_KEYS: "k1 k2", p.P_BORN_HOST: "10.1.1.1"},
    {p.P_UNIQ: "ID-3", p.P_TYPE: "3", P_DELIVER_MS: "1732480099000", p.P_ENCODING: "GZIP"},
    {p.P_UNIQ: "ID-4", p.P_TRACE: "00-abc-01", p.P_DLQ_TOPIC: "acme%orders", P_DLQ_QUEUE: "1"},
    {},  # no UNIQ_KEY: the offset message id; no type: NORMAL
]


@pytest.mark.parametrize("properties", MESSAGE_KINDS)
def test_received_message_bytes_are_unchanged(properties: dict[str, str]) -> None:
    stored = stored_message(properties)
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


@pytest.mark.parametrize("handle", HANDLES)
def test_a_codec_told_to_issue_version_1_does_and_reads_both(handle: ReceiptHandle) -> None:
    # a rolling upgrade (receipt_handle_version = 1): handles that nodes not yet upgraded can verify
    old_style = ReceiptCodec(SECRET, issue_version=1)
    text = old_style.encode(handle)
    assert text == _reference_handle(handle, "1")
    assert ReceiptCodec(SECRET).decode(text) == old_style.decode(text) == handle
    assert old_style.decode(_reference_handle(handle, "2")) == handle
    with pytest.raises(ValueError, match="version"):
        ReceiptCodec(SECRET, issue_version=3)
