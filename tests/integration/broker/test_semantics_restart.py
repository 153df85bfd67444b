"""One SIGKILL with everything pending at once: delay messages, open transactions, FIFO messages in
flight and held, and a retry waiting out its backoff. After the restart nothing is lost and nothing
comes early (issue 5)."""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

from .conftest import V2, BrokerProcess, messages

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _send(v2: V2, topic: str, body: bytes, **fields: object) -> svc.SendResultEntry:
    sp = pb.SystemProperties(
        message_id=uuid.uuid4().hex.upper(), body_encoding=pb.Encoding.IDENTITY, born_host="tester"
    )
    if "group" in fields:
        sp.message_type, sp.message_group = pb.MessageType.FIFO, str(fields["group"])
        sp.queue_id = 0
    elif "deliver_ms" in fields:
        sp.message_type = pb.MessageType.DELAY
        sp.delivery_timestamp.FromMilliseconds(int(fields["deliver_ms"]))  # type: ignore[call-overload]
    elif fields.get("tx"):
        sp.message_type = pb.MessageType.TRANSACTION
    else:
        sp.message_type = pb.MessageType.NORMAL
    msg = pb.Message(topic=v2.res(topic), body=body, system_properties=sp)
    resp = v2.stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=v2.md, timeout=10)
    assert resp.status.code == pb.Code.OK, resp
    return resp.entries[0]


def _end(v2: V2, entry: svc.SendResultEntry, commit: bool) -> int:
    request = svc.EndTransactionRequest(
        topic=v2.res("pay"),
        message_id=entry.message_id,
        transaction_id=entry.transaction_id,
        resolution=pb.TransactionResolution.COMMIT if commit else pb.TransactionResolution.ROLLBACK,
        source=pb.TransactionSource.SOURCE_CLIENT,
    )
    return int(v2.stub.EndTransaction(request, metadata=v2.md, timeout=10).status.code)


def test_everything_pending_survives_sigkill(broker: BrokerProcess) -> None:
    with BrokerAdminClient(broker.target) as admin:
        admin.create_topic("later", namespace="acme", queue_count=2, message_type="DELAY")
        admin.create_topic("pay", namespace="acme", queue_count=2, message_type="TRANSACTION")
        admin.create_topic("seq", namespace="acme", queue_count=1, message_type="FIFO")
        admin.create_topic("work", namespace="acme", queue_count=1)
        admin.create_group("g", namespace="acme")
        admin.create_group("gf", namespace="acme", fifo=True)
        admin.create_group("gr", namespace="acme", retry_delays_ms=[6000])
    v2 = V2(broker.target, namespace="acme")
    # given: delay messages due 7..9 s from now
    start = time.time() * 1000
    due = {
        _send(v2, "later", f"d{i}".encode(), deliver_ms=start + 7000 + i * 1000).message_id: start
        + 7000
        + i * 1000
        for i in range(3)
    }
    # two open transactions
    keep, drop = _send(v2, "pay", b"keep", tx=True), _send(v2, "pay", b"drop", tx=True)
    # FIFO: A0 and B0 in flight (unacked), A1..A2 and B1..B2 waiting behind them
    for seq in range(3):
        for grp in "AB":
            _send(v2, "seq", f"{grp}{seq}".encode(), group=grp)
    inflight = messages(v2.receive("gf", "seq", invisible_s=60, batch=8))
    assert sorted(m.body for m in inflight) == [b"A0", b"B0"]
    # a retry waiting out the group's 6 s backoff (its invisible time of 1 s has run out)
    retry_id = _send(v2, "work", b"retry-me").message_id
    [once] = messages(v2.receive("gr", "work", invisible_s=1))
    time.sleep(1.3)
    assert messages(v2.receive("gr", "work", poll_s=0.3)) == []  # the expiry starts the backoff now
    backoff_started = time.monotonic()
    v2.close()

    # when: the broker is killed and started again
    assert broker.stop(signal.SIGKILL) == -signal.SIGKILL
    broker.start()
    v2 = V2(broker.target, namespace="acme")
    try:
        # FIFO: the receipts of before still work, and the order goes on
        for m in inflight:
            assert v2.ack("gf", "seq", m).status.code == pb.Code.OK
        order: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(order) < 4 and time.monotonic() < deadline:
            for m in messages(v2.receive("gf", "seq", batch=8, poll_s=1)):
                order.append(m.body)
                v2.ack("gf", "seq", m)
        assert [b for b in order if b.startswith(b"A")] == [b"A1", b"A2"]
        assert [b for b in order if b.startswith(b"B")] == [b"B1", b"B2"]
        # transactions: still pending, resolved now
        assert messages(v2.receive("g", "pay", poll_s=0.5)) == []
        assert _end(v2, keep, commit=True) == pb.Code.OK
        assert _end(v2, drop, commit=False) == pb.Code.OK
        [committed] = messages(v2.receive("g", "pay", poll_s=3))
        assert committed.body == b"keep"
        v2.ack("g", "pay", committed)
        # the retry: not before its backoff, then attempt 2
        [again] = messages(v2.receive("gr", "work", poll_s=10))
        assert time.monotonic() - backoff_started >= 5.5
        assert again.system_properties.message_id == retry_id == once.system_properties.message_id
        assert again.system_properties.delivery_attempt == 2
        v2.ack("gr", "work", again)
        # delay messages: none early, all of them
        got: dict[str, float] = {}
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            for m in messages(v2.receive("g", "later", batch=8, poll_s=2)):
                got[m.system_properties.message_id] = time.time() * 1000
                v2.ack("g", "later", m)
        assert set(got) == set(due)
        for mid, at in got.items():
            assert at >= due[mid] - 50, (mid, at - due[mid])
        # nothing more anywhere
        for group, topic in (("g", "pay"), ("gf", "seq"), ("gr", "work"), ("g", "later")):
            assert messages(v2.receive(group, topic, poll_s=0.3)) == []
    finally:
        v2.close()
