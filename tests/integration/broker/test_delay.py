"""Delay messages against a real broker process: timing, recall, SIGKILL with pending timers."""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = pytest.mark.integration


def _setup(admin: BrokerAdminClient, message_type: str = "DELAY") -> None:
    admin.create_topic("later", namespace="acme", queue_count=2, message_type=message_type)
    admin.create_group("g1", namespace="acme")


def _send_delay(v2: V2, deliver_ms: int, body: bytes, n: int = 1) -> svc.SendMessageResponse:
    msgs = []
    for _ in range(n):
        sp = pb.SystemProperties(
            message_id=uuid.uuid4().hex.upper(),
            body_encoding=pb.Encoding.IDENTITY,
            message_type=pb.MessageType.DELAY,
            born_host="tester",
        )
        sp.delivery_timestamp.FromMilliseconds(deliver_ms)
        msgs.append(pb.Message(topic=v2.res("later"), body=body, system_properties=sp))
    return v2.stub.SendMessage(svc.SendMessageRequest(messages=msgs), metadata=v2.md, timeout=10)


def _receive_all(v2: V2, expected: int, timeout: float) -> list[tuple[pb.Message, float]]:
    got: list[tuple[pb.Message, float]] = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        for msg in messages(v2.receive("g1", "later", batch=32, poll_s=1)):
            got.append((msg, time.time() * 1000))
            assert v2.ack("g1", "later", msg).status.code == pb.Code.OK
    return got


def test_delay_message_arrives_at_its_time(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    deliver = int(time.time() * 1000) + 2000
    sent = _send_delay(v2, deliver, b"later-body", n=3)
    assert sent.status.code == pb.Code.OK
    assert all(e.recall_handle for e in sent.entries)
    assert messages(v2.receive("g1", "later", poll_s=1)) == []
    got = _receive_all(v2, 3, timeout=8)
    assert len(got) == 3
    for msg, received_ms in got:
        assert received_ms >= deliver
        assert msg.body == b"later-body"
        assert msg.topic.name == "later" and msg.topic.resource_namespace == "acme"
        assert msg.system_properties.message_type == pb.MessageType.DELAY
        assert msg.system_properties.delivery_timestamp.ToMilliseconds() == deliver
    assert {m.system_properties.message_id for m, _ in got} == {e.message_id for e in sent.entries}


def test_recall_prevents_delivery(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin, "MIXED")
    deliver = int(time.time() * 1000) + 2000
    keep = _send_delay(v2, deliver, b"keep")
    drop = _send_delay(v2, deliver, b"drop")
    recall = svc.RecallMessageRequest(topic=v2.res("later"), recall_handle=drop.entries[0].recall_handle)
    answer = v2.stub.RecallMessage(recall, metadata=v2.md, timeout=10)
    assert answer.status.code == pb.Code.OK
    assert answer.message_id == drop.entries[0].message_id
    got = _receive_all(v2, 1, timeout=6)
    assert [m.body for m, _ in got] == [b"keep"]
    assert messages(v2.receive("g1", "later", poll_s=1.5)) == []
    # too late: the kept one was delivered
    late = svc.RecallMessageRequest(topic=v2.res("later"), recall_handle=keep.entries[0].recall_handle)
    assert v2.stub.RecallMessage(late, metadata=v2.md, timeout=10).status.code == pb.Code.NOT_FOUND
    forged = svc.RecallMessageRequest(topic=v2.res("later"), recall_handle="bm90aGluZw.AAAA")
    assert v2.stub.RecallMessage(forged, metadata=v2.md, timeout=10).status.code == pb.Code.BAD_REQUEST


def test_delivery_time_limits_and_types(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    too_far = int(time.time() * 1000) + 4 * 86_400_000
    answer = _send_delay(v2, too_far, b"x")
    assert answer.status.code == pb.Code.ILLEGAL_DELIVERY_TIME
    admin.create_topic("plain", namespace="acme", queue_count=1)
    sp = pb.SystemProperties(message_id="ID1", message_type=pb.MessageType.DELAY)
    sp.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 1000)
    msg = pb.Message(topic=v2.res("plain"), body=b"x", system_properties=sp)
    answer = v2.stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=v2.md, timeout=10)
    assert answer.status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_pending_timers_survive_sigkill(broker: BrokerProcess, admin: BrokerAdminClient) -> None:
    _setup(admin)
    v2 = V2(broker.target, namespace="acme")
    deliver = int(time.time() * 1000) + 4000
    sent = _send_delay(v2, deliver, b"survivor", n=20)
    assert sent.status.code == pb.Code.OK
    time.sleep(0.5)
    v2.close()
    broker.stop(signal.SIGKILL)
    broker.start()
    v2 = V2(broker.target, namespace="acme")
    try:
        got = _receive_all(v2, 20, timeout=15)
        assert {m.system_properties.message_id for m, _ in got} >= {e.message_id for e in sent.entries}
        assert all(received >= deliver for _, received in got)
    finally:
        v2.close()
