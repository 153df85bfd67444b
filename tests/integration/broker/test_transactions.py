"""Transactional messages against a real broker: half invisibility, commit/rollback, check-back, SIGKILL."""

from __future__ import annotations

import queue
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.conftest import free_port
from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = pytest.mark.integration


@pytest.fixture
def tx_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BrokerProcess]:
    # fast checks: immune for 1 s, then every 0.5 s
    monkeypatch.setenv("MQ_BROKER_TRANSACTION_TIMEOUT_MS", "1000")
    monkeypatch.setenv("MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS", "500")
    process = BrokerProcess(tmp_path / "broker", free_port())
    process.start()
    yield process
    process.kill()


@pytest.fixture
def client(tx_broker: BrokerProcess) -> Iterator[V2]:
    admin = BrokerAdminClient(tx_broker.target)
    admin.create_topic("pay", namespace="acme", queue_count=2, message_type="TRANSACTION")
    admin.create_topic("plain", namespace="acme", queue_count=1)
    admin.create_group("g1", namespace="acme")
    admin.close()
    v2 = V2(tx_broker.target, namespace="acme")
    yield v2
    v2.close()


def _send_tx(v2: V2, body: bytes = b"tx-body", topic: str = "pay") -> svc.SendMessageResponse:
    sp = pb.SystemProperties(
        message_id=uuid.uuid4().hex.upper(),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=pb.MessageType.TRANSACTION,
        born_host="tester",
        tag="t1",
    )
    sp.keys.append("k1")
    msg = pb.Message(topic=v2.res(topic), body=body, system_properties=sp, user_properties={"a": "1"})
    return v2.stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=v2.md, timeout=10)


def _end(
    v2: V2,
    sent: svc.SendResultEntry,
    resolution: int,
    source: int = pb.TransactionSource.SOURCE_CLIENT,
    transaction_id: str | None = None,
) -> int:
    request = svc.EndTransactionRequest(
        topic=v2.res("pay"),
        message_id=sent.message_id,
        transaction_id=sent.transaction_id if transaction_id is None else transaction_id,
        resolution=resolution,  # type: ignore[arg-type]
        source=source,  # type: ignore[arg-type]
    )
    return int(v2.stub.EndTransaction(request, metadata=v2.md, timeout=10).status.code)


def test_half_invisible_until_commit(client: V2) -> None:
    sent = _send_tx(client)
    assert sent.status.code == pb.Code.OK
    [entry] = sent.entries
    assert entry.transaction_id
    assert messages(client.receive("g1", "pay", poll_s=1)) == []
    assert _end(client, entry, pb.TransactionResolution.COMMIT) == pb.Code.OK
    [msg] = messages(client.receive("g1", "pay", poll_s=3))
    assert msg.body == b"tx-body" and msg.system_properties.message_id == entry.message_id
    assert msg.system_properties.tag == "t1" and list(msg.system_properties.keys) == ["k1"]
    assert dict(msg.user_properties) == {"a": "1"}
    assert msg.system_properties.message_type == pb.MessageType.TRANSACTION
    assert client.ack("g1", "pay", msg).status.code == pb.Code.OK
    # idempotent repeat; the other resolution is refused; delivered once
    assert _end(client, entry, pb.TransactionResolution.COMMIT) == pb.Code.OK
    assert _end(client, entry, pb.TransactionResolution.ROLLBACK) == pb.Code.INVALID_TRANSACTION_ID
    assert messages(client.receive("g1", "pay", poll_s=1)) == []


def test_rollback_and_unknown_ids(client: V2) -> None:
    [entry] = _send_tx(client).entries
    assert _end(client, entry, pb.TransactionResolution.ROLLBACK) == pb.Code.OK
    assert messages(client.receive("g1", "pay", poll_s=1.5)) == []
    forged = "7F00000100001F90" + "0" * 15 + "1"
    assert (
        _end(client, entry, pb.TransactionResolution.COMMIT, transaction_id=forged)
        == pb.Code.INVALID_TRANSACTION_ID
    )
    assert (
        _end(client, entry, pb.TransactionResolution.COMMIT, transaction_id="nope")
        == pb.Code.INVALID_TRANSACTION_ID
    )
    # a TRANSACTION message on a NORMAL topic
    assert _send_tx(client, topic="plain").status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_check_back_through_telemetry(client: V2) -> None:
    settings = pb.Settings(
        client_type=pb.ClientType.PRODUCER,
        publishing=pb.Publishing(topics=[client.res("pay")]),
        user_agent=pb.UA(language=pb.Language.PYTHON, version="5.1.2"),
    )
    done = threading.Event()

    def commands() -> Iterator[svc.TelemetryCommand]:
        yield svc.TelemetryCommand(settings=settings)
        done.wait(30)

    stream = client.stub.Telemetry(commands(), metadata=client.md, timeout=30)
    received: queue.Queue[svc.TelemetryCommand] = queue.Queue()

    def read() -> None:
        try:
            for command in stream:
                received.put(command)
        except grpc.RpcError:
            pass  # cancelled at the end of the test

    threading.Thread(target=read, daemon=True).start()
    assert received.get(timeout=10).status.code == pb.Code.OK  # the settings answer
    [entry] = _send_tx(client, b"orphan").entries
    command = received.get(timeout=10)
    assert command.WhichOneof("command") == "recover_orphaned_transaction_command"
    check = command.recover_orphaned_transaction_command
    assert check.transaction_id == entry.transaction_id
    assert check.message.system_properties.message_id == entry.message_id
    assert check.message.topic.name == "pay" and check.message.topic.resource_namespace == "acme"
    assert check.message.body == b"orphan"
    assert (
        _end(client, entry, pb.TransactionResolution.COMMIT, pb.TransactionSource.SOURCE_SERVER_CHECK)
        == pb.Code.OK
    )
    [msg] = messages(client.receive("g1", "pay", poll_s=3))
    assert msg.body == b"orphan"
    done.set()
    stream.cancel()


def test_pending_survives_sigkill(tx_broker: BrokerProcess, client: V2) -> None:
    [entry] = _send_tx(client, b"durable").entries
    [committed] = _send_tx(client, b"done").entries
    assert _end(client, committed, pb.TransactionResolution.ROLLBACK) == pb.Code.OK
    tx_broker.stop(signal.SIGKILL)
    tx_broker.start()
    v2 = V2(tx_broker.target, namespace="acme")
    try:
        assert messages(v2.receive("g1", "pay", poll_s=1)) == []
        assert _end(v2, committed, pb.TransactionResolution.COMMIT) == pb.Code.INVALID_TRANSACTION_ID
        assert _end(v2, entry, pb.TransactionResolution.COMMIT) == pb.Code.OK
        [msg] = messages(v2.receive("g1", "pay", poll_s=3))
        assert msg.body == b"durable" and msg.system_properties.message_id == entry.message_id
    finally:
        v2.close()
