"""The compiled send path (``build_sent`` in dataplane/_v2_codec.c) builds what build_message does.

``produce.build_compiled`` reads a SendMessageRequest's bytes and builds every message at once, or
answers None so that ``build_message``, the reference, builds them one by one (or refuses them, saying
why). On random requests, valid and not: whenever the compiled builder answers, the reference builds
the same messages (and moves the round-robin position the same way); whenever the reference refuses
a message, the compiled builder does not answer; and for the usual request it does answer.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplane.auth import Authenticator, Principal
from dataplane.auth.resources import sent_topics, touched
from dataplane.config import BrokerSettings
from dataplane.errors import BrokerError, TopicNotFound
from dataplane.metadata import TopicConfig, TopicType
from dataplane.services import produce as p
from dataplane.store.message import AppendEntry, MessageToStore
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

PEER = ("10.0.0.7", 5123)
TOPICS = {
    "acme%orders": TopicConfig("acme%orders", queue_count=4),
    "acme%fifo": TopicConfig("acme%fifo", queue_count=2, message_type=TopicType.FIFO),
    "acme%mixed": TopicConfig(
        "acme%mixed", queue_count=3, message_type=TopicType.MIXED, max_message_bytes=16
    ),
    "acme%later": TopicConfig("acme%later", queue_count=1, message_type=TopicType.DELAY),
    "plain": TopicConfig("plain", queue_count=5),
}


def _topic(name: str) -> TopicConfig:
    if name not in TOPICS:
        raise TopicNotFound(f"no topic {name}")
    return TOPICS[name]


# build_message reads settings, topic(), and (for DELAY and TRANSACTION messages) timers/transactions
BROKER: Any = SimpleNamespace(
    settings=BrokerSettings(max_body_bytes=64, max_properties=4, max_keys=3, max_tag_length=8),
    topic=_topic,
    timers=object(),
    transactions=object(),
)


def _reference(request: svc.SendMessageRequest, header_ns: str) -> list[MessageToStore] | None:
    """build_message per message, as send_message does without the compiled builder (None: refused)."""
    out = []
    for message in request.messages:
        try:
            out.append(p.build_message(BROKER, message, header_ns, PEER, {})[0])
        except BrokerError:
            return None
    return out


def _both(request: svc.SendMessageRequest, header_ns: str = "") -> tuple[Any, Any]:
    """(reference, compiled), each from the same round-robin position; the positions they leave agree."""
    p._round_robin.clear()
    p._round_robin["acme%orders"] = 7
    reference = _reference(request, header_ns)
    after_reference = dict(p._round_robin)
    p._round_robin.clear()
    p._round_robin["acme%orders"] = 7
    compiled = p.build_compiled(BROKER, request, header_ns, PEER)
    if compiled is not None:
        assert reference is not None, "the compiled builder took a request the reference refuses"
        messages, ids = compiled
        assert messages == reference
        assert [type(m) for m in messages] == [MessageToStore] * len(messages)
        assert ids == [m.properties[p.P_UNIQ] for m in reference]
        assert p._round_robin == after_reference
    return reference, compiled


def _message(topic: str = "orders", ns: str = "acme", body: bytes = b"hello", **sp: Any) -> pb.Message:
    user = sp.pop("user_properties", {})
    sp.setdefault("message_id", "ID-1")
    return pb.Message(
        topic=pb.Resource(resource_namespace=ns, name=topic),
        body=body,
        user_properties=user,
        system_properties=pb.SystemProperties(**sp),
    )


def test_the_broker_sends_with_the_compiled_builder() -> None:
    assert p.BUILDER == "compiled", "dataplane/_v2_codec.c is not built: run scripts/build_ext.py"


def test_the_compiled_builder_fills_message_slots_or_calls_the_class() -> None:
    """MessageToStore's slots are filled by the compiled builder (no __init__ run per message); a
    class it does not recognise (here one with a __post_init__) is called instead, as before."""
    assert p.FILLS_SLOTS
    built = p.build_compiled(BROKER, svc.SendMessageRequest(messages=[_message()]), "", PEER)
    assert built is not None
    (stored,), _ = built
    assert stored == MessageToStore(stored.topic, stored.queue_id, b"hello", stored.properties, 0, 0, 0, PEER)
    assert (stored.reconsume_times, stored.prepared_transaction_offset) == (0, 0)
    stored.flag = 5  # an ordinary, writable object
    assert stored.flag == 5

    @dataclasses.dataclass(slots=True)
    class Checked(MessageToStore):
        def __post_init__(self) -> None:
            self.flag = 99

    codec = p._v2_codec
    try:
        assert codec.configure_send(Checked, p.SYSTEM_PROPERTY_KEYS, p.STORE_PROPERTY_NAMES) is False
        built = p.build_compiled(BROKER, svc.SendMessageRequest(messages=[_message()]), "", PEER)
        assert built is not None and type(built[0][0]) is Checked and built[0][0].flag == 99
    finally:
        assert codec.configure_send(MessageToStore, p.SYSTEM_PROPERTY_KEYS, p.STORE_PROPERTY_NAMES) is True


def test_a_usual_batch_is_built_by_the_compiled_builder() -> None:
    born = pb.SystemProperties().born_timestamp
    born.FromMilliseconds(1_700_000_000_123)
    request = svc.SendMessageRequest(
        messages=[
            _message(
                message_id=f"ID-{i}",
                tag="t",
                keys=["k1", "k2"],
                born_host="10.1.2.3",
                born_timestamp=born,
                queue_id=i - 1,  # -1 and 4 take the round robin
                body_encoding=pb.GZIP if i == 2 else pb.IDENTITY,
                trace_context="00-abc-01" if i == 3 else None,
                user_properties={"color": "red", "ключ": "значение ✓", "empty": ""},
            )
            for i in range(6)
        ]
    )
    reference, compiled = _both(request)
    assert compiled is not None and reference is not None
    first = compiled[0][1]
    assert first.properties == {
        "color": "red",
        "ключ": "значение ✓",
        "empty": "",
        p.P_TAGS: "t",
        p.P_KEYS: "k1 k2",
        p.P_UNIQ: "ID-1",
        p.P_TYPE: "1",
        p.P_BORN_HOST: "10.1.2.3",
        p.P_NS: "acme",
    }
    assert (first.topic, first.queue_id, first.born_timestamp, first.born_host) == (
        "acme%orders",
        0,
        1_700_000_000_123,
        PEER,
    )
    assert [m.queue_id for m in compiled[0]] == [7 % 4, 0, 1, 2, 3, 8 % 4]


def test_fifo_messages_and_the_header_namespace() -> None:
    request = svc.SendMessageRequest(
        messages=[_message("fifo", ns="", message_group="g-1", message_type=pb.FIFO, queue_id=1)]
    )
    _, compiled = _both(request, header_ns="acme")
    assert compiled is not None
    assert compiled[0][0].properties[p.P_GROUP] == "g-1"
    assert compiled[0][0].properties[p.P_TYPE] == "2"


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(_message(body=b""), id="empty body"),
        pytest.param(_message(body=b"x" * 65), id="body over the limit"),
        pytest.param(_message(message_id=""), id="no id"),
        pytest.param(_message(message_id="x" * 129), id="long id"),
        pytest.param(_message(message_id="a\x01b"), id="id with \x01"),
        pytest.param(_message(tag=""), id="empty tag"),
        pytest.param(_message(tag="*"), id="tag *"),
        pytest.param(_message(tag="a|b"), id="tag with |"),
        pytest.param(_message(tag="a b"), id="tag with space"),
        pytest.param(_message(tag=" a"), id="tag with leading space"),
        pytest.param(_message(tag="abcdefghi"), id="long tag"),
        pytest.param(_message(keys=["a b"]), id="key with space"),
        pytest.param(_message(keys=["k1", "k2", "k3", "k4"]), id="too many keys"),
        pytest.param(_message(keys=[""]), id="empty key"),
        pytest.param(_message(user_properties={"TAGS": "x"}), id="reserved property"),
        pytest.param(_message(user_properties={"__MQ_X": "x"}), id="__MQ_ property"),
        pytest.param(_message(user_properties={" k": "x"}), id="property key with space"),
        pytest.param(_message(user_properties={"k\t": "x"}), id="property key ending in a tab"),
        pytest.param(_message(user_properties={"k\u2003": "x"}), id="unicode space in key"),
        pytest.param(_message(user_properties={"k": "v\x02"}), id="value with \x02"),
        pytest.param(_message(user_properties={f"k{i}": "v" for i in range(5)}), id="too many properties"),
        pytest.param(_message(message_group="g"), id="group on NORMAL"),
        pytest.param(_message(message_type=pb.FIFO), id="FIFO without group"),
        pytest.param(_message("fifo", message_group=" g", message_type=pb.FIFO), id="group with space"),
        pytest.param(_message(message_type=pb.DELAY), id="DELAY"),
        pytest.param(_message(message_type=pb.TRANSACTION), id="TRANSACTION"),
        pytest.param(_message(message_type=pb.LITE), id="LITE"),
        pytest.param(_message("fifo"), id="NORMAL on FIFO topic"),
        pytest.param(_message("missing"), id="no such topic"),
        pytest.param(_message("later"), id="a DELAY topic"),
        pytest.param(_message(born_host="h" * 129), id="long born host"),
        pytest.param(_message(born_host="a\x01b"), id="born host with \x01"),
        pytest.param(_message(trace_context="t\x02"), id="trace with \x02"),
    ],
)
def test_what_the_compiled_builder_leaves_to_the_reference(message: pb.Message) -> None:
    ok = _message(message_id="ID-0")
    _, compiled = _both(svc.SendMessageRequest(messages=[ok, message]))
    assert compiled is None


def test_a_request_over_two_topics_is_left_to_the_reference() -> None:
    request = svc.SendMessageRequest(messages=[_message(), _message("plain", ns="")])
    reference, compiled = _both(request)
    assert reference is not None and compiled is None


def test_delivery_times_and_born_times() -> None:
    born = pb.SystemProperties().born_timestamp
    born.seconds, born.nanos = -5, -1  # before 1970: stored as 0
    _, compiled = _both(svc.SendMessageRequest(messages=[_message(born_timestamp=born)]))
    assert compiled is not None and compiled[0][0].born_timestamp == 0
    born.seconds, born.nanos = 10, 999_999_999
    _, compiled = _both(svc.SendMessageRequest(messages=[_message(born_timestamp=born)]))
    assert compiled is not None and compiled[0][0].born_timestamp == 10_999
    born.seconds, born.nanos = 10, -1  # nanos below zero: floor division, as Python's //
    _, compiled = _both(svc.SendMessageRequest(messages=[_message(born_timestamp=born)]))
    assert compiled is not None and compiled[0][0].born_timestamp == 9_999
    later = pb.SystemProperties().delivery_timestamp
    later.seconds = 1
    _, compiled = _both(svc.SendMessageRequest(messages=[_message("mixed", delivery_timestamp=later)]))
    assert compiled is None


def _timestamp(ms: int) -> Any:
    stamp = pb.SystemProperties().born_timestamp
    stamp.FromMilliseconds(ms)
    return stamp


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_NAME = st.one_of(
    st.sampled_from(["", "a", "k1", "TAGS", "__MQ_X", " a", "a ", "a|b", "*", "ключ", "x" * 130]), _TEXT
)


@st.composite
def _messages(draw: Any) -> pb.Message:
    topic, ns = draw(
        st.sampled_from([("orders", "acme"), ("fifo", "acme"), ("mixed", "acme"), ("plain", "")])
    )
    sp: dict[str, Any] = {
        "message_id": draw(st.one_of(st.just("ID"), _NAME)),
        "message_type": draw(st.sampled_from([0, 0, 1, 1, 2, 3, 4, 6])),
        "queue_id": draw(st.integers(-(2**31), 2**31 - 1) | st.integers(-1, 6)),
        "body_encoding": draw(st.sampled_from([0, 1, 2])),
        "born_host": draw(st.one_of(st.just("127.0.0.1"), _TEXT)),
    }
    for name in ("tag", "message_group", "trace_context"):
        if draw(st.booleans()):
            sp[name] = draw(_NAME)
    sp["keys"] = draw(st.lists(_NAME, max_size=4))
    if draw(st.booleans()):
        born = pb.SystemProperties().born_timestamp
        born.seconds = draw(st.integers(-(2**40), 2**40))
        born.nanos = draw(st.integers(-999_999_999, 999_999_999))
        sp["born_timestamp"] = born
    if draw(st.integers(0, 9)) == 0:
        later = pb.SystemProperties().delivery_timestamp
        later.seconds = draw(st.integers(0, 2**33))
        sp["delivery_timestamp"] = later
    user = draw(st.dictionaries(_NAME, _TEXT, max_size=5))
    body = draw(st.binary(max_size=20))
    return _message(topic, ns, body, user_properties=user, **sp)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_messages(), min_size=1, max_size=4))
def test_random_requests_build_as_the_reference_does(messages: list[pb.Message]) -> None:
    _both(svc.SendMessageRequest(messages=messages))


_PLAIN = st.text(
    st.characters(max_codepoint=0x2FFF, blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), max_size=8
)
_VALUE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"), max_size=8)


@st.composite
def _valid_messages(draw: Any, topic: str, fifo: bool) -> pb.Message:
    sp: dict[str, Any] = {
        "message_id": draw(_PLAIN.filter(bool)),
        "queue_id": draw(st.integers(-3, 9)),
        "born_timestamp": _timestamp(draw(st.integers(-(2**42), 2**42))),
        "body_encoding": draw(st.sampled_from([0, 1, 2])),
        "born_host": draw(st.sampled_from(["", "127.0.0.1", "[::1]", "ホスト"])),
        "keys": draw(st.lists(_PLAIN.filter(bool), max_size=3)),
    }
    if fifo:
        sp["message_group"] = draw(_PLAIN.filter(bool))
        sp["message_type"] = draw(st.sampled_from([0, 2]))
    else:
        sp["message_type"] = draw(st.sampled_from([0, 1]))
    if draw(st.booleans()):
        sp["tag"] = draw(_PLAIN.filter(lambda t: t not in ("", "*") and "|" not in t))
    if draw(st.booleans()):
        sp["trace_context"] = draw(_VALUE)
    user = draw(st.dictionaries(st.text("abcxyz", min_size=1, max_size=4), _VALUE, max_size=4))
    body = draw(st.binary(min_size=1, max_size=16))
    return _message(topic, "acme", body, user_properties=user, **sp)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([("orders", False), ("fifo", True), ("mixed", False), ("mixed", True)]).flatmap(
        lambda kind: st.lists(_valid_messages(*kind), min_size=1, max_size=8)
    )
)
def test_valid_requests_are_built_by_the_compiled_builder(messages: list[pb.Message]) -> None:
    reference, compiled = _both(svc.SendMessageRequest(messages=messages))
    assert reference is not None
    assert compiled is not None


def _python_summary(
    request: svc.SendMessageRequest, header_ns: str
) -> tuple[dict[tuple[str, str], list[int]], list[tuple[str, str]]]:
    saved = p._send_sizes
    p._send_sizes = None  # the Python loop, the reference
    try:
        return p.send_summary(request, header_ns)
    finally:
        p._send_sizes = saved


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "acme", "other"]),
            st.sampled_from(["orders", "b", ""]),
            st.binary(max_size=9),
        ),
        min_size=1,
        max_size=10,
    ),
    st.sampled_from(["", "acme"]),
)
def test_send_sizes_from_the_bytes_as_from_the_messages(
    messages: list[tuple[str, str, bytes]], header_ns: str
) -> None:
    request = svc.SendMessageRequest(messages=[_message(name, ns, body) for ns, name, body in messages])
    compiled = p.send_summary(request, header_ns)[0]
    python = _python_summary(request, header_ns)[0]
    assert {k: sorted(v) for k, v in compiled.items()} == {k: sorted(v) for k, v in python.items()}
    assert sum(map(len, compiled.values())) == len(messages)


def test_send_summary_leaves_odd_bytes_to_the_python_loop() -> None:
    # a message naming its topic twice (protobuf merges the two): the loop reads the merged topic
    message = (
        _message(body=b"abc").SerializeToString()
        + pb.Message(topic=pb.Resource(name="billing")).SerializeToString()
    )
    raw = svc.SendMessageRequest(messages=[pb.Message.FromString(message)]).SerializeToString()
    assert p._send_sizes(raw) == ({("acme", "billing"): [3]}, [("acme", "billing")])  # one merged topic
    doubled = b"\x0a" + bytes([len(message)]) + message  # field 1, the message with two topic fields
    assert p._send_sizes(doubled) is None
    request = svc.SendMessageRequest.FromString(doubled)
    assert p.send_summary(request, "") == ({("acme", "billing"): [3]}, [("acme", "billing")])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["", "acme", "other"]), st.sampled_from(["orders", "b", ""])),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(["", "acme", "other"]),
)
def test_sent_topics_decide_as_every_message_does(topics: list[tuple[str, str]], header_ns: str) -> None:
    """A SendMessage's access check reads one topic per run of consecutive messages to the same
    topic, from the bytes: the runs are the reference loop's, and checking them refuses, and finds the
    tenant, exactly as checking every message's topic does (the first refusal's message included)."""
    request = svc.SendMessageRequest(messages=[_message(name, ns) for ns, name in topics])
    runs = p.send_summary(request, header_ns)[1]
    assert runs == _python_summary(request, header_ns)[1]
    assert runs == [t for i, t in enumerate(topics) if i == 0 or topics[i - 1] != t]
    auth = Authenticator(SimpleNamespace(version=0, acls_for=lambda ns: ()), dev_mode=True)
    for principal in (None, Principal("AK1", "acme"), Principal("AK2", "other")):

        def decide(touches: list[Any], principal: Principal | None = principal) -> str:
            try:
                return "tenant " + auth.authorize(principal, touches, header_ns, "ipv4:127.0.0.1:1")
            except BrokerError as exc:
                return f"refused: {exc.message}"

        assert decide(sent_topics(runs)) == decide(touched("SendMessage", request))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(_PLAIN.filter(bool), st.integers(0, 2**63 - 1) | st.integers(0, 3)), min_size=1, max_size=20
    )
)
def test_the_compiled_answer_parses_as_the_python_one(entries: list[tuple[str, int]]) -> None:
    built = [(mid, None) for mid, _ in entries]
    appended = [AppendEntry(1000 + i, offset, 0, 0, "") for i, (_, offset) in enumerate(entries)]
    data = p._encode_sent(p._OK_STATUS_BYTES, built, appended)
    reference = p._ok_response(built, appended)
    assert svc.SendMessageResponse.FromString(data) == reference
    assert data == reference.SerializeToString(deterministic=True)
