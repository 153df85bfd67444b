"""AckMessage's compiled check (``_v2_codec.ack_checked``) takes only requests whose every entry may be
acked, and answers them as the Python loop, its reference, does; everything else goes to that loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bench.broker_bench import receive_request
from bench.broker_work import HandlerCall
from dataplane import _v2_codec  # type: ignore[attr-defined]
from dataplane.broker import Broker
from dataplane.buffered_stream import Encoded
from dataplane.config import BrokerSettings
from dataplane.metadata import GroupConfig, TopicConfig
from dataplane.pop import PopState
from dataplane.services import consume
from dataplane.store.message import MessageToStore
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

TOPIC, GROUP, OTHER_TOPIC = "orders", "billing", "refunds"
QUEUES = 4


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = Broker(BrokerSettings(data_dir=tmp_path, listen="127.0.0.1:0"))
    b.start(asyncio.get_running_loop())
    for topic in (TOPIC, OTHER_TOPIC):
        b.metadata.create_topic(TopicConfig(name=topic, queue_count=QUEUES))
        b.store.put_messages(
            [
                MessageToStore(topic, i % QUEUES, b"x" * 10, {"UNIQ_KEY": f"{topic}-{i:04d}"})
                for i in range(24)
            ]
        )
    b.metadata.create_group(GroupConfig(name=GROUP))
    try:
        yield b
    finally:
        b.begin_shutdown()
        b.close()


async def _receive(broker: Broker, topic: str, batch: int) -> list[pb.Message]:
    request = receive_request(GROUP, topic, batch, 30)  # the store holds them: no long poll
    frames = [f async for f in consume.receive_message(broker, request, HandlerCall(), "")]
    return [svc.ReceiveMessageResponse.FromString(f.data).message for f in frames if isinstance(f, Encoded)]


def _ack_request(entries: list[tuple[str, str]], topic: str = TOPIC) -> svc.AckMessageRequest:
    return svc.AckMessageRequest(
        group=pb.Resource(name=GROUP),
        topic=pb.Resource(name=topic),
        entries=[svc.AckMessageEntry(message_id=m, receipt_handle=h) for m, h in entries],
    )


def _entries(messages: list[pb.Message]) -> list[tuple[str, str]]:
    return [(m.system_properties.message_id, m.system_properties.receipt_handle) for m in messages]


def _checked(broker: Broker, request: svc.AckMessageRequest, topic: str = TOPIC) -> Any:
    assert broker.pop is not None
    return _v2_codec.ack_checked(
        request.SerializeToString(),
        broker.receipts.mac,
        GROUP,
        topic,
        broker.pop.positions(),
        consume._OK_STATUS_BYTES,
    )


def _in_flight(broker: Broker, topic: str = TOPIC) -> int:
    assert broker.pop is not None
    return sum(len(broker.pop.position(GROUP, topic, q).in_flight) for q in range(QUEUES))


async def test_a_request_of_acks_is_checked_in_one_call_and_acked_durably(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    received = await _receive(broker, TOPIC, 16)
    assert len(received) == 16 and len({m.system_properties.queue_id for m in received}) > 1
    request = _ack_request(_entries(received))

    checked = _checked(broker, request)
    assert checked is not None
    by_queue, acked, answer = checked
    # every entry, once, by queue, with the attempt the trace records; nothing acked by the check itself
    assert sorted((q, o) for q, offsets in by_queue.items() for o in offsets) == sorted(
        (m.system_properties.queue_id, m.system_properties.queue_offset) for m in received
    )
    assert acked == [(m.system_properties.message_id, 1) for m in received]
    assert _in_flight(broker) == 16
    # the answer of the Python loop for such a request: OK on top and on every entry, echoed
    expected = svc.AckMessageResponse(status=consume.OK_STATUS)
    for message_id, handle in _entries(received):
        expected.entries.add(message_id=message_id, receipt_handle=handle).status.CopyFrom(consume.OK_STATUS)
    assert svc.AckMessageResponse.FromString(answer) == expected

    taken = []
    compiled = consume._ack_checked
    monkeypatch.setattr(consume, "_ack_checked", lambda *a: taken.append(compiled(*a)) or taken[-1])
    assert consume.ack_message(broker, request, "") == expected
    assert taken and taken[0] is not None  # the usual request went the compiled way
    assert _in_flight(broker) == 0
    # the acks reached the POP journal: a state loaded from it has nothing in flight either
    assert broker.pop is not None
    broker.pop.close()
    reloaded = PopState(tmp_path / "pop", initial_offset=lambda g, t, q: 0, on_commit=lambda g, t, q, o: None)
    assert sum(len(p.in_flight) for _, p in reloaded.items()) == 0
    reloaded.close()


async def test_a_handle_acked_once_is_refused_the_second_time_as_stale(broker: Broker) -> None:
    received = await _receive(broker, TOPIC, 4)
    entries = _entries(received)
    assert consume.ack_message(broker, _ack_request(entries[:1]), "").status.code == pb.Code.OK
    again = _ack_request(entries)  # the first is stale now, the other three may be acked
    assert _checked(broker, again) is None
    answer = consume.ack_message(broker, again, "")
    assert answer.status.code == pb.Code.MULTIPLE_RESULTS
    assert [e.status.code for e in answer.entries] == [pb.Code.INVALID_RECEIPT_HANDLE] + [pb.Code.OK] * 3
    assert _in_flight(broker) == 0


async def test_a_handle_twice_in_one_request_is_acked_once(broker: Broker) -> None:
    received = await _receive(broker, TOPIC, 3)
    entries = _entries(received)
    request = _ack_request([*entries, entries[1]])
    assert _checked(broker, request) is None
    answer = consume.ack_message(broker, request, "")
    assert [e.status.code for e in answer.entries] == [pb.Code.OK] * 3 + [pb.Code.INVALID_RECEIPT_HANDLE]


async def test_a_handle_redelivered_since_is_stale(broker: Broker) -> None:
    received = await _receive(broker, TOPIC, 2)
    handle = received[0].system_properties.receipt_handle
    renewed = consume.change_invisible_duration(
        broker,
        svc.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=GROUP),
            topic=pb.Resource(name=TOPIC),
            receipt_handle=handle,
            message_id=received[0].system_properties.message_id,
            invisible_duration={"seconds": 20},
        ),
        "",
    )
    assert renewed.status.code == pb.Code.OK
    # the old handle names the message's queue and offset, still in flight, under a retired nonce
    assert _checked(broker, _ack_request(_entries(received))) is None
    answer = consume.ack_message(broker, _ack_request(_entries(received)), "")
    assert [e.status.code for e in answer.entries] == [pb.Code.INVALID_RECEIPT_HANDLE, pb.Code.OK]
    assert _in_flight(broker) == 1


async def test_handles_of_another_topic_forged_or_unknown_fields_go_to_the_python_loop(
    broker: Broker,
) -> None:
    mine = _entries(await _receive(broker, TOPIC, 2))
    theirs = _entries(await _receive(broker, OTHER_TOPIC, 1))
    body, tag = mine[0][1].split(".")
    forged = f"{body}.{'A' * len(tag)}"
    with_lite_topic = _ack_request(mine)
    with_lite_topic.entries[0].lite_topic = "lite"
    for request in (
        _ack_request([*mine, theirs[0]]),  # another topic's handle in an ack of this topic
        _ack_request([(mine[0][0], forged), mine[1]]),
        _ack_request([(mine[0][0], "not a handle"), mine[1]]),
        with_lite_topic,
    ):
        assert _checked(broker, request) is None
    # and the loop answers them: the refused entry alone is refused
    answer = consume.ack_message(broker, _ack_request([(mine[0][0], forged), mine[1]]), "")
    assert [e.status.code for e in answer.entries] == [pb.Code.INVALID_RECEIPT_HANDLE, pb.Code.OK]
    answer = consume.ack_message(broker, _ack_request([*mine[:1], theirs[0]]), "")
    assert [e.status.code for e in answer.entries] == [pb.Code.OK, pb.Code.INVALID_RECEIPT_HANDLE]
    assert _in_flight(broker) == 0 and _in_flight(broker, OTHER_TOPIC) == 1


def test_malformed_request_bytes_are_left_to_the_python_loop() -> None:
    for raw in (b"\x1a\x05\x0a\x03ab", b"\xff\xff", b"\x1a\x02\x18\x01", b""):
        assert _v2_codec.ack_checked(raw, object(), GROUP, TOPIC, {}, b"") is None


async def test_a_message_id_that_is_not_text_is_left_to_the_python_loop(broker: Broker) -> None:
    (message_id, handle), *_ = _entries(await _receive(broker, TOPIC, 1))
    raw = bytearray(_ack_request([(message_id, handle)]).SerializeToString())
    at = raw.index(message_id.encode())
    raw[at] = 0xFF  # the id's first byte: no longer UTF-8 (protobuf would refuse to parse it)
    assert broker.pop is not None
    args = (broker.receipts.mac, GROUP, TOPIC, broker.pop.positions(), consume._OK_STATUS_BYTES)
    assert _v2_codec.ack_checked(bytes(raw), *args) is None
    assert _in_flight(broker) == 1
