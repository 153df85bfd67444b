"""FIFO consumer groups on a real broker: one in-flight message per message group, in send order."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid

import pytest

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
