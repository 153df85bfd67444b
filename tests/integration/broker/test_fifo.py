"""FIFO consumer groups on a real broker: one in-flight message per message group, in send order."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid

import pytest

from dataplane.services.consume import P_DLQ_ATTEMPTS
from dataplane.services.produce import P_DLQ_TOPIC
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = pytest.mark.integration

QUEUES = 2


def _setup(admin: BrokerAdminClient) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=QUEUES, message_type="FIFO")
    admin.create_group("g1", namespace="acme", fifo=True)


def _send(v2: V2, message_group: str, seq: int) -> None:
    """As the SDKs do: a message group always goes to the queue sha256(group) mod n."""
    qid = int.from_bytes(hashlib.sha256(message_group.encode()).digest(), "big") % QUEUES
    sp = pb.SystemProperties(
        message_id=uuid.uuid4().hex.upper(),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=pb.MessageType.FIFO,
        born_host="tester",
        message_group=message_group,
        queue_id=qid,
    )
    msg = pb.Message(
        topic=v2.res("orders"),
        body=f"{message_group}-{seq}".encode(),
        user_properties={"seq": str(seq)},
        system_properties=sp,
    )
    response = v2.stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=v2.md, timeout=10)
    assert response.status.code == pb.Code.OK


def _key(m: pb.Message) -> tuple[str, int, int]:
    return (
        m.system_properties.message_group,
        int(m.user_properties["seq"]),
        m.system_properties.delivery_attempt,
    )


def _receive(v2: V2, *, invisible_s: float = 30, poll_s: float = 1) -> list[pb.Message]:
    return messages(v2.receive("g1", "orders", batch=32, invisible_s=invisible_s, poll_s=poll_s))


def test_groups_in_order_one_in_flight_each(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    groups = ["A", "B", "C"]
    for seq in range(10):
        for g in groups:
            _send(v2, g, seq)
    seen: dict[str, list[int]] = {g: [] for g in groups}
    for step in range(10):
        batch = _receive(v2)
        # one message of every group in flight at once: the groups interleave, never two of one group
        assert sorted(_key(m) for m in batch) == [(g, step, 1) for g in groups]
        assert _receive(v2, poll_s=0.3) == []  # every group busy until its message is acked
        for m in batch:
            seen[m.system_properties.message_group].append(int(m.user_properties["seq"]))
            assert v2.ack("g1", "orders", m).status.code == pb.Code.OK
    assert seen == {g: list(range(10)) for g in groups}
    assert _receive(v2, poll_s=0.3) == []


def test_unacked_message_blocks_its_group_then_comes_first(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    for seq in range(3):
        _send(v2, "A", seq)
        _send(v2, "B", seq)
    first = {m.system_properties.message_group: m for m in _receive(v2, invisible_s=2)}
    assert sorted(_key(m) for m in first.values()) == [("A", 0, 1), ("B", 0, 1)]
    v2.ack("g1", "orders", first["B"])  # A0 is never acked
    [b1] = _receive(v2, invisible_s=30)
    assert _key(b1) == ("B", 1, 1)
    v2.ack("g1", "orders", b1)
    [b2] = _receive(v2)  # B goes on while A0 is still invisible
    assert _key(b2) == ("B", 2, 1)
    [a0] = _receive(v2, poll_s=4)  # A0's invisible time runs out: it comes again, attempt 2
    assert _key(a0) == ("A", 0, 2)
    assert _receive(v2, poll_s=0.3) == []
    v2.ack("g1", "orders", a0)
    v2.ack("g1", "orders", b2)
    assert [_key(m) for m in _receive(v2)] == [("A", 1, 1)]


def test_ack_wakes_a_long_poll_for_the_next_of_the_group(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    _send(v2, "A", 0)
    _send(v2, "A", 1)
    [a0] = _receive(v2)
    result: list[list[pb.Message]] = []
    waiter = threading.Thread(target=lambda: result.append(_receive(v2, poll_s=8)))
    waiter.start()
    time.sleep(0.5)
    started = time.monotonic()
    v2.ack("g1", "orders", a0)
    waiter.join()
    assert [_key(m) for m in result[0]] == [("A", 1, 1)]
    assert time.monotonic() - started < 3


def test_order_survives_restart(broker: BrokerProcess, admin: BrokerAdminClient) -> None:
    _setup(admin)
    v2 = V2(broker.target, namespace="acme")
    for seq in range(4):
        _send(v2, "A", seq)
        _send(v2, "B", seq)
    first = {m.system_properties.message_group: m for m in _receive(v2)}
    assert sorted(_key(m) for m in first.values()) == [("A", 0, 1), ("B", 0, 1)]
    v2.ack("g1", "orders", first["A"])
    [a1] = _receive(v2)
    assert _key(a1) == ("A", 1, 1)
    v2.close()
    assert broker.stop() == 0
    broker.start()
    v2 = V2(broker.target, namespace="acme")
    assert _receive(v2, poll_s=0.5) == []  # A1 and B0 still in flight: both groups blocked
    assert v2.ack("g1", "orders", first["B"]).status.code == pb.Code.OK  # handle from before the restart
    [b1] = _receive(v2)
    assert _key(b1) == ("B", 1, 1)
    assert v2.ack("g1", "orders", a1).status.code == pb.Code.OK
    assert v2.ack("g1", "orders", b1).status.code == pb.Code.OK
    rest: list[tuple[str, int, int]] = []
    for _ in range(6):
        batch = _receive(v2, poll_s=0.5)
        rest += [_key(m) for m in batch]
        for m in batch:
            v2.ack("g1", "orders", m)
    assert [k for k in rest if k[0] == "A"] == [("A", 2, 1), ("A", 3, 1)]
    assert [k for k in rest if k[0] == "B"] == [("B", 2, 1), ("B", 3, 1)]
    v2.close()


def _dead_letters(broker: BrokerProcess) -> list[tuple[str, bytes, str, str]]:
    from mqcloud.admin_messages import MessageAdminClient

    with MessageAdminClient(broker.target) as messages_admin:
        dead = messages_admin.list_dead_letters("acme%g1")
    return [
        (
            d.message_group,
            d.body,
            d.system_properties.get(P_DLQ_TOPIC, ""),
            d.system_properties[P_DLQ_ATTEMPTS],
        )
        for d in dead
    ]


def test_order_continues_after_a_message_runs_out_of_attempts(
    broker: BrokerProcess, admin: BrokerAdminClient, v2: V2
) -> None:
    """A message that exhausts its delivery attempts goes to the DLQ; its group resumes with the next."""
    # given: a FIFO group allowing two deliveries, A0 A1 A2 in group A and B0 in group B
    admin.create_topic("orders", namespace="acme", queue_count=QUEUES, message_type="FIFO")
    admin.create_group("g1", namespace="acme", fifo=True, max_delivery_attempts=2)
    for seq in range(3):
        _send(v2, "A", seq)
    _send(v2, "B", 0)

    # when: A0 is received twice and never acked
    first = {m.system_properties.message_group: m for m in _receive(v2, invisible_s=1)}
    assert sorted(_key(m) for m in first.values()) == [("A", 0, 1), ("B", 0, 1)]
    assert v2.ack("g1", "orders", first["B"]).status.code == pb.Code.OK
    [again] = _receive(v2, invisible_s=1, poll_s=4)
    assert _key(again) == ("A", 0, 2)  # not A1: A is blocked while A0 has attempts left

    # then: once A0's last invisible time runs out, A1 is next, at its first attempt, alone
    [a1] = _receive(v2, poll_s=4)
    assert _key(a1) == ("A", 1, 1)
    assert _dead_letters(broker) == [("A", b"A-0", "acme%orders", "2")]
    assert _receive(v2, poll_s=0.3) == []  # A2 waits for A1
    assert v2.ack("g1", "orders", a1).status.code == pb.Code.OK
    [a2] = _receive(v2)
    assert _key(a2) == ("A", 2, 1)
    assert v2.ack("g1", "orders", a2).status.code == pb.Code.OK
    # A0 is never delivered again, and the DLQ holds it once
    assert _receive(v2, poll_s=2) == []
    assert len(_dead_letters(broker)) == 1


def test_order_continues_after_the_consumer_forwards_to_the_dlq(
    broker: BrokerProcess, admin: BrokerAdminClient, v2: V2
) -> None:
    """What a PushConsumer does when its FIFO listener fails: forward, then the group goes on at once."""
    _setup(admin)
    for seq in range(3):
        _send(v2, "A", seq)
    [a0] = _receive(v2)
    assert _key(a0) == ("A", 0, 1)
    waiter: list[list[pb.Message]] = []
    thread = threading.Thread(target=lambda: waiter.append(_receive(v2, poll_s=8)))
    thread.start()
    time.sleep(0.5)  # the long poll is parked: A is busy
    started = time.monotonic()
    forward = svc.ForwardMessageToDeadLetterQueueRequest(
        group=v2.res("g1"),
        topic=v2.res("orders"),
        receipt_handle=a0.system_properties.receipt_handle,
        message_id=a0.system_properties.message_id,
        delivery_attempt=1,
        max_delivery_attempts=1,
    )
    assert (
        v2.stub.ForwardMessageToDeadLetterQueue(forward, metadata=v2.md, timeout=10).status.code == pb.Code.OK
    )
    thread.join()
    # the forward freed group A: the parked long poll got A1 without waiting out its timeout
    assert [_key(m) for m in waiter[0]] == [("A", 1, 1)]
    assert time.monotonic() - started < 3
    assert _dead_letters(broker) == [("A", b"A-0", "acme%orders", "1")]
    assert v2.ack("g1", "orders", waiter[0][0]).status.code == pb.Code.OK
    assert [_key(m) for m in _receive(v2)] == [("A", 2, 1)]
