"""Real processes: POP in-flight state, acks and timer progress survive a master failover, because
they travel through the CommitLog (rmq_sys_pop_state, rmq_sys_timer_progress; docs/ha.md); the
promoted node tells its Telemetry clients to reconnect."""

from __future__ import annotations

import queue
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.integration.broker.conftest import V2, messages
from tests.integration.ha.cluster import HACluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INVISIBLE_S = 15


def _send_delay(v2: V2, deliver_ms: int, body: bytes) -> None:
    sp = pb.SystemProperties(
        message_id=uuid.uuid4().hex.upper(),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=pb.MessageType.DELAY,
        born_host="tester",
    )
    sp.delivery_timestamp.FromMilliseconds(deliver_ms)
    msg = pb.Message(topic=v2.res("later"), body=body, system_properties=sp)
    resp = v2.stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=v2.md, timeout=10)
    assert resp.status.code == pb.Code.OK, resp.status


def _telemetry(v2: V2, stop: threading.Event) -> queue.Queue[svc.TelemetryCommand]:
    """A consumer's Telemetry stream; what the broker pushes on it goes into the queue."""
    settings = pb.Settings(
        client_type=pb.ClientType.SIMPLE_CONSUMER,
        subscription=pb.Subscription(group=v2.res("workers")),
        user_agent=pb.UA(language=pb.Language.PYTHON, version="5.1.2"),
    )

    def commands() -> Iterator[svc.TelemetryCommand]:
        yield svc.TelemetryCommand(settings=settings)
        stop.wait(60)

    stream = v2.stub.Telemetry(commands(), metadata=v2.md, timeout=60)
    received: queue.Queue[svc.TelemetryCommand] = queue.Queue()

    def read() -> None:
        try:
            for command in stream:
                received.put(command)
        except grpc.RpcError:
            pass  # cancelled at the end of the test

    threading.Thread(target=read, daemon=True).start()
    assert received.get(timeout=10).status.code == pb.Code.OK  # the settings answer
    return received


def test_pop_state_and_timers_survive_failover(tmp_path: Path) -> None:
    cluster = HACluster(tmp_path, size=2)
    try:
        cluster.start()
        master = cluster.wait_in_sync(2)
        with BrokerAdminClient(master.target) as admin:
            admin.create_topic("orders", queue_count=2)
            admin.create_topic("later", queue_count=1, message_type="DELAY")
            admin.create_group("workers")
        producer = V2(master.target)
        for i in range(10):
            assert producer.send("orders", b"m%d" % i).status.code == pb.Code.OK
        now_ms = int(time.time() * 1000)
        early_ms, late_ms = now_ms + 1500, now_ms + 13_000
        _send_delay(producer, early_ms, b"early")
        _send_delay(producer, late_ms, b"late")

        # given 10 messages received (invisible for 15 s) on the old master, 5 of them acked
        consumer = V2(master.target)
        received: dict[bytes, pb.Message] = {}
        received_at = time.time()
        while len(received) < 10:
            for m in messages(consumer.receive("workers", "orders", batch=10, invisible_s=INVISIBLE_S)):
                received[m.body] = m
        for i in range(5):
            assert consumer.ack("workers", "orders", received[b"m%d" % i]).status.code == pb.Code.OK
        # and the early delay message delivered by the old master, consumed and acked
        early = []
        while not early:
            early = messages(consumer.receive("workers", "later", poll_s=2))
        assert [m.body for m in early] == [b"early"]
        assert consumer.ack("workers", "later", early[0]).status.code == pb.Code.OK
        cluster.wait_caught_up(10)
        # and a client with a Telemetry stream to the replica
        stop = threading.Event()
        replica = next(n for n in cluster.nodes if n is not master)
        pushed = _telemetry(V2(replica.target), stop)

        # when the master dies before the late delay message is due
        assert time.time() * 1000 < late_ms - 6000
        master.signal(signal.SIGKILL)
        new = cluster.wait_master(exclude=master.node)
        assert time.time() < received_at + INVISIBLE_S - 2, "failover took too long for this test"
        # then the promoted node tells its clients to reconnect (their routes are stale)
        assert new is replica
        command = pushed.get(timeout=5)
        assert command.WhichOneof("command") == "reconnect_endpoints_command"
        assert command.reconnect_endpoints_command.nonce
        stop.set()

        # then the in-flight messages are still invisible and the acked ones gone
        reader = V2(new.target)
        assert messages(reader.receive("workers", "orders", batch=16, poll_s=1)) == []
        # and a receipt handle issued by the old master acks on the new one
        assert reader.ack("workers", "orders", received[b"m5"]).status.code == pb.Code.OK

        # when their invisible time ends, exactly the four unacked messages come back
        time.sleep(max(0.0, received_at + INVISIBLE_S - time.time()))
        again: dict[bytes, pb.Message] = {}
        deadline = time.monotonic() + 10
        while len(again) < 4 and time.monotonic() < deadline:
            for m in messages(reader.receive("workers", "orders", batch=16, poll_s=1)):
                assert m.body not in again, f"{m.body!r} delivered twice"
                again[m.body] = m
                assert reader.ack("workers", "orders", m).status.code == pb.Code.OK
        assert sorted(again) == [b"m6", b"m7", b"m8", b"m9"]
        assert all(m.system_properties.delivery_attempt == 2 for m in again.values())

        # and the late delay message is delivered once, at its time, by the new master; the early
        # one is not delivered again
        later: list[tuple[bytes, float]] = []
        deadline = time.monotonic() + (late_ms / 1000 - time.time()) + 8
        while time.monotonic() < deadline:
            for m in messages(reader.receive("workers", "later", poll_s=1)):
                later.append((m.body, time.time() * 1000))
                assert reader.ack("workers", "later", m).status.code == pb.Code.OK
            if later and time.time() * 1000 > late_ms + 2000:
                break
        assert [body for body, _ in later] == [b"late"], later
        assert later[0][1] >= late_ms
        assert messages(reader.receive("workers", "orders", batch=16, poll_s=1)) == []
    finally:
        cluster.close()
