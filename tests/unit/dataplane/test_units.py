"""Pure broker pieces: receipt handles, namespaces, settings merge, tag filters, POP state."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.errors import BadRequest, IllegalFilterExpression, IllegalTopic, InvalidReceiptHandle
from dataplane.filters import matches, parse_tag_expression
from dataplane.metadata import GroupConfig
from dataplane.names import dlq_topic, qualify, resolve, split
from dataplane.pop import NONCE, PopState
from dataplane.receipt import ReceiptCodec, ReceiptHandle, load_or_create_secret
from dataplane.services.telemetry import merge_settings
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

HANDLE = ReceiptHandle("acme%g", "acme%t", 3, 42, "abcd", 1_700_000_000_000)


def test_receipt_round_trip_and_forgery() -> None:
    codec = ReceiptCodec(b"k" * 32)
    text = codec.encode(HANDLE)
    assert codec.decode(text) == HANDLE
    body, sig = text.split(".")
    with pytest.raises(InvalidReceiptHandle):
        codec.decode(body + "." + sig[::-1])
    with pytest.raises(InvalidReceiptHandle):
        ReceiptCodec(b"x" * 32).decode(text)
    for junk in ("", "junk", "a.b.c", "!!!.???", "x" * 5000):
        with pytest.raises(InvalidReceiptHandle):
            codec.decode(junk)


def test_secret_is_persisted(tmp_path: Path) -> None:
    assert load_or_create_secret(tmp_path) == load_or_create_secret(tmp_path)
    assert (tmp_path / "receipt.secret").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("resource_ns", "header_ns", "expected"),
    [
        pytest.param("acme", "", ("acme", "acme%t"), id="resource"),
        pytest.param("", "acme", ("acme", "acme%t"), id="header-fallback"),
        pytest.param("", "", ("", "t"), id="none"),
        pytest.param("acme", "acme", ("acme", "acme%t"), id="both-agree"),
    ],
)
def test_namespace_resolution(resource_ns: str, header_ns: str, expected: tuple[str, str]) -> None:
    assert resolve(pb.Resource(resource_namespace=resource_ns, name="t"), header_ns) == expected


def test_namespace_conflict_and_bad_names() -> None:
    with pytest.raises(BadRequest):
        resolve(pb.Resource(resource_namespace="a", name="t"), "b")
    with pytest.raises(IllegalTopic):
        resolve(pb.Resource(name="has%percent"), "")
    assert split(qualify("ns", "g")) == ("ns", "g") and split("bare") == ("", "bare")
    assert dlq_topic("ns%g") == "%DLQ%ns%g"


def test_tag_filters() -> None:
    assert parse_tag_expression("*") is None and parse_tag_expression("") is None
    tags = parse_tag_expression("a || b")
    assert tags == frozenset({"a", "b"})
    assert matches(tags, "a") and not matches(tags, "c") and not matches(tags, None)
    assert matches(None, None)
    with pytest.raises(IllegalFilterExpression):
        parse_tag_expression("||")


def test_settings_merge_producer_and_consumer() -> None:
    producer = pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(max_body_size=1 << 27)
    )
    merged = merge_settings(producer, max_body_bytes=4 << 20)
    assert merged.publishing.max_body_size == 4 << 20 and merged.publishing.validate_message_type
    assert merged.backoff_policy.WhichOneof("strategy") == "exponential_backoff"
    assert merged.backoff_policy.max_attempts == 3 and not merged.metric.on
    consumer = pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER, subscription=pb.Subscription())
    group = GroupConfig(name="g", fifo=True, retry_policy={"customized": {"delays_ms": [1000, 5000]}})
    merged = merge_settings(consumer, max_body_bytes=1, group=group, max_attempts=5)
    assert merged.subscription.fifo and merged.subscription.receive_batch_size == 32
    assert merged.subscription.long_polling_timeout.seconds == 20
    assert merged.backoff_policy.max_attempts == 5
    assert [d.seconds for d in merged.backoff_policy.customized_backoff.next] == [1, 5]


def test_pop_state_survives_reopen(tmp_path: Path) -> None:
    commits: list[tuple[str, str, int, int]] = []

    def open_state() -> PopState:
        return PopState(tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: commits.append(a))

    state = open_state()
    e0 = state.deliver("g", "t", 0, 0, 1, 10_000, 1)
    state.deliver("g", "t", 0, 1, 1, 10_000, 2)
    state.ack("g", "t", 0, 1)
    assert state.position("g", "t", 0).committed() == 0
    state._journal.close()  # simulate a crash: no compaction
    reopened = open_state()
    pos = reopened.position("g", "t", 0)
    assert pos.next_offset == 2 and list(pos.in_flight) == [0]
    assert reopened.lookup("g", "t", 0, 0, e0[NONCE]) is not None
    reopened.ack("g", "t", 0, 0)
    assert commits[-1] == ("g", "t", 0, 2)
    reopened.close()
    assert open_state().position("g", "t", 0).in_flight == {}
