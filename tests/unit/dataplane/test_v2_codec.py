"""The compiled receive path (dataplane/_v2_codec.c) writes and reads what the Python code does.

``dataplane/_v2_codec.c`` turns a stored record into the bytes of a ``ReceiveMessageResponse``;
``fill_v2_message`` (pinned against the constructor-built reference in test_consume_fast_path.py) is
its reference. Official clients parse these bytes, so both are compared parsed and re-serialized
(deterministically: map entries in key order) for every kind of message, and on random ones.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane import receipt
from dataplane.errors import InvalidReceiptHandle
from dataplane.receipt import ReceiptCodec, ReceiptHandle
from dataplane.services import consume
from dataplane.services import produce as p
from dataplane.services.consume import encode_received
from dataplane.store.message import StoredMessage
from dataplane.timer.service import P_DELIVER_MS
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.unit.dataplane.test_consume_fast_path import MESSAGE_KINDS, stored_message

TOPIC = pb.Resource(resource_namespace="acme", name="orders")


def _python(stored: StoredMessage, *args: Any) -> svc.ReceiveMessageResponse:
    response = svc.ReceiveMessageResponse()
    consume.fill_v2_message(response.message, stored, TOPIC, *args)
    return response


def _assert_same(stored: StoredMessage, *args: Any) -> svc.ReceiveMessageResponse:
    data = encode_received(stored, TOPIC.SerializeToString(), *args)
    compiled = svc.ReceiveMessageResponse.FromString(data)
    expected = _python(stored, *args)
    assert compiled == expected
    assert compiled.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
    return compiled


def test_the_broker_receives_with_the_compiled_encoder() -> None:
    assert consume.ENCODER == "compiled", "dataplane/_v2_codec.c is not built: run scripts/build_ext.py"


@pytest.mark.parametrize(
    "properties",
    [
        *MESSAGE_KINDS,
        {p.P_UNIQ: "ID-5", p.P_TAGS: "", p.P_KEYS: "", p.P_BORN_HOST: "", P_DELIVER_MS: "soon"},
        {p.P_UNIQ: "ID-6", p.P_TYPE: "0", "": "empty key", "ключ": "значение ✓", "__MQ_X": "hidden"},
        {p.P_UNIQ: "ID-7", p.P_KEYS: "a\tb  c", p.P_ENCODING: "IDENTITY", "DELAY": "3", "REAL_TOPIC": "x"},
    ],
)
def test_every_kind_of_message_encodes_as_the_python_builder_does(properties: dict[str, str]) -> None:
    received = _assert_same(stored_message(properties), "broker:8081", "handle.sig", 3, 30_500)
    digest = received.message.system_properties.body_digest
    assert digest.type == pb.DigestType.SHA1
    assert digest.checksum == hashlib.sha1(received.message.body).hexdigest().upper()


@pytest.mark.parametrize(
    "args",
    [
        ("broker:8081", None, None, None),  # no handle, attempt or invisible time (PullMessage's shape)
        ("", "h", 0, 0),  # zero values of optional fields are still written
        ("broker:8081", "h", -1, 1_001),
    ],
)
def test_optional_fields_are_present_exactly_when_the_python_builder_sets_them(args: tuple[Any, ...]) -> None:
    received = _assert_same(stored_message({p.P_UNIQ: "ID"}), *args)
    sp = received.message.system_properties
    assert sp.HasField("receipt_handle") == (args[1] is not None)
    assert sp.HasField("delivery_attempt") == (args[2] is not None)
    assert sp.HasField("invisible_duration") == (args[3] is not None)


@pytest.mark.parametrize(
    "fields",
    [
        {"queue_id": 0, "queue_offset": 0},  # queue 0 and offset 0 (offset is an optional field: kept)
        {"store_ms": 0, "born_ms": 0},  # empty timestamps are still present
        {"born_ms": -1_500},  # before 1970: floor division, as Python's // and %
        {"born_host": ""},
        {"queue_id": 2**31 - 1, "queue_offset": 2**62},
    ],
)
def test_edge_values_of_the_record(fields: dict[str, Any]) -> None:
    _assert_same(stored_message({p.P_UNIQ: "ID"}, **fields), "broker:8081", "h", 1, 60_000)


def test_an_empty_body_is_left_out_as_protobuf_does() -> None:
    received = _assert_same(stored_message({p.P_UNIQ: "ID"}, b""), "broker:8081", "h", 1, 60_000)
    assert received.message.body == b""


def test_bad_records_raise_as_the_python_builder_does() -> None:
    args = (TOPIC.SerializeToString(), "broker:8081", "h", 1, 60_000)
    bad_type = stored_message({p.P_TYPE: "NORMAL"})  # not a number: int() fails in both
    with pytest.raises(ValueError):
        consume._encode_received_py(bad_type, *args)
    with pytest.raises(ValueError):
        encode_received(bad_type, *args)
    with pytest.raises(TypeError):
        encode_received(stored_message({"k": 1}), *args)  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        encode_received(stored_message({}), "not bytes", *args[1:])
    with pytest.raises(TypeError):
        encode_received((1, 2), *args)
    with pytest.raises(TypeError):
        encode_received(stored_message({}), *args[:-1])


_text = st.text(max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    user=st.dictionaries(_text, _text, max_size=6),
    system=st.fixed_dictionaries(
        {},
        optional={
            p.P_UNIQ: _text,
            p.P_TAGS: _text,
            p.P_KEYS: _text,
            p.P_TYPE: st.integers(0, 5).map(str),
            p.P_GROUP: _text,
            p.P_BORN_HOST: _text,
            p.P_TRACE: _text,
            p.P_ENCODING: st.sampled_from(["GZIP", "IDENTITY", ""]),
            P_DELIVER_MS: st.integers(0, 2**41).map(str) | _text,
            p.P_DLQ_TOPIC: _text,
        },
    ),
    body=st.binary(max_size=300),
    numbers=st.tuples(  # queue id, queue offset, store and born times (ms)
        st.integers(0, 2**31 - 1),
        st.integers(0, 2**63 - 1),
        st.integers(-(2**40), 2**41),
        st.integers(-(2**40), 2**41),
    ),
    handle=st.none() | _text,
    attempt=st.none() | st.integers(-(2**31), 2**31 - 1),
    invisible_ms=st.none() | st.integers(0, 2**40),
    store_host=_text,
)
def test_random_messages_encode_as_the_python_builder_does(
    user: dict[str, str],
    system: dict[str, str],
    body: bytes,
    numbers: tuple[int, int, int, int],
    handle: str | None,
    attempt: int | None,
    invisible_ms: int | None,
    store_host: str,
) -> None:
    queue_id, queue_offset, store_ms, born_ms = numbers
    properties = {**user, **system}
    if P_DELIVER_MS in properties and properties[P_DELIVER_MS].isdigit():
        try:
            int(properties[P_DELIVER_MS])
        except ValueError:  # a digit int() does not take ("²"): both raise; covered above
            del properties[P_DELIVER_MS]
    stored = stored_message(
        properties, body, queue_id=queue_id, queue_offset=queue_offset, store_ms=store_ms, born_ms=born_ms
    )
    _assert_same(stored, store_host, handle, attempt, invisible_ms)


# Receipt handles: ReceiptCodec issues and verifies version-2 handles through the compiled codec; the
# Python code (pinned to a standard-library reference in test_consume_fast_path.py) is its reference.

SECRET = b"s" * 32


def _python_handle(codec: ReceiptCodec, handle: ReceiptHandle) -> str:
    return codec._encode_parts_py(*handle)


@settings(max_examples=300, deadline=None)
@given(  # names as the broker validates them: no surrogates, and no "|" but in the last field
    group=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="|"), max_size=40),
    topic=st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
    queue_id=st.integers(-(2**31), 2**31 - 1),
    offset=st.integers(0, 2**63 - 1),
    nonce=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="|"), max_size=20),
    until=st.integers(-(2**63), 2**63 - 1),
)
def test_handles_are_issued_and_read_as_the_python_codec_does(
    group: str, topic: str, queue_id: int, offset: int, nonce: str, until: int
) -> None:
    codec = ReceiptCodec(SECRET)
    handle = ReceiptHandle(group, topic, queue_id, offset, nonce, until)
    text = codec.encode(handle)
    assert receipt._compiled_encode is not None and text == _python_handle(codec, handle)
    decoded = receipt._compiled_decode(codec._mac, text, ReceiptHandle)
    assert decoded == handle and type(decoded) is ReceiptHandle
    assert codec.decode(text) == codec._decode_py(text) == handle


def test_the_compiled_decoder_leaves_everything_else_to_the_python_code() -> None:
    codec = ReceiptCodec(SECRET)
    text = codec.encode(ReceiptHandle("acme%g", "acme%t", 3, 42, "00ff00ff00ff00ff", 1_700_000_000_000))
    body, tag = text.split(".")
    flipped = tag[:-2] + ("A" if tag[-2] != "A" else "B") + tag[-1]
    other_key = ReceiptCodec(b"t" * 32).encode(ReceiptHandle("acme%g", "acme%t", 3, 42, "00", 1))
    refused = {
        "forged tag": f"{body}.{flipped}",
        "another broker's secret": other_key,
        "v1 layout": receipt_v1(codec, "acme%g", "acme%t"),
        "two dots": f"{body}.{tag}.x",
        "no dot": body,
        "not base64url": f"{body}+.{tag}",
        "non-ASCII": f"{body}é.{tag}",
        "short tag": f"{body}.{tag[:-3]}",
        "too long": f"{body}{'A' * 2100}.{tag}",
        "empty": "",
    }
    for why, bad in refused.items():
        assert receipt._compiled_decode(codec._mac, bad, ReceiptHandle) is None, why
    assert codec.decode(refused["v1 layout"]) == ReceiptHandle("acme%g", "acme%t", 1, 2, "ab", 3)
    for why in ("forged tag", "another broker's secret", "two dots", "non-ASCII", "short tag", "empty"):
        with pytest.raises(InvalidReceiptHandle):
            codec.decode(refused[why])


def receipt_v1(codec: ReceiptCodec, group: str, topic: str) -> str:
    """A handle as brokers before version 2 issued it (HMAC-SHA256), through the codec's v1 path."""
    payload = f"1|1|2|ab|3|{group}|{topic}".encode()
    return f"{receipt._b64(payload)}.{receipt._b64(codec._sign(payload))}"
