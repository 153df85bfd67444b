"""Receives with auto_renew (push consumers): the broker keeps their messages invisible while the
client is connected, the handle the client holds stays valid, and the messages come back when the
client leaves or the renewals reach their bound (a real broker, short settings)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.conftest import free_port
from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

OK = 20000


@pytest.fixture
def node(tmp_path: Path) -> Iterator[BrokerProcess]:
    env = {
        "MQ_BROKER_DEFAULT_INVISIBLE_MS": "2000",  # what a receive without a duration gets
        "MQ_BROKER_AUTO_RENEW_PERIOD_S": "0.2",
        "MQ_BROKER_AUTO_RENEW_AHEAD_MS": "1000",
        "MQ_BROKER_AUTO_RENEW_SLICE_MS": "1500",
        "MQ_BROKER_AUTO_RENEW_MAX_MS": "6000",
        "MQ_BROKER_AUTO_RENEW_RELEASED_MS": "200",
        "MQ_BROKER_AUTO_RENEW_GONE_AFTER_S": "1",
    }
    process = BrokerProcess(tmp_path / "broker", free_port(), env=env)
    process.start()
    BrokerAdminClient(process.target).create_topic("orders", queue_count=1)
    BrokerAdminClient(process.target).create_group("billing")
    yield process
    process.kill()


def _others_get(v2: V2, seconds: float) -> list[str]:
    """What another member of the group receives over ``seconds`` (message ids)."""
    got: list[str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got += [m.system_properties.message_id for m in messages(v2.receive("billing", "orders", poll_s=0.5))]
    return got


def test_a_push_consumers_message_stays_invisible_and_its_handle_valid(node: BrokerProcess) -> None:
    consumer, other = V2(node.target), V2(node.target)
    sent = consumer.send("orders", b"slow work").entries[0].message_id
    # as the official push consumers ask: auto_renew, no invisible duration (the broker's 2 s here)
    taken = messages(consumer.receive("billing", "orders", invisible_s=None, auto_renew=True))
    assert [m.system_properties.message_id for m in taken] == [sent]
    assert _others_get(other, 5.0) == []  # 2.5 times the invisible time: renewed meanwhile
    assert consumer.ack("billing", "orders", taken[0]).status.code == OK  # the handle it was given
    assert _others_get(other, 1.0) == []
    # without auto_renew the same wait brings it back (what the renewals prevented above)
    again = consumer.send("orders", b"plain").entries[0].message_id
    assert [
        m.system_properties.message_id for m in messages(consumer.receive("billing", "orders", invisible_s=2))
    ] == [again]
    assert _others_get(other, 4.0) == [again]
    consumer.close()
    other.close()


def test_the_messages_of_a_leaving_client_come_back_at_once(node: BrokerProcess) -> None:
    consumer, other = V2(node.target), V2(node.target)
    sent = consumer.send("orders", b"left behind").entries[0].message_id
    taken = messages(consumer.receive("billing", "orders", invisible_s=30, auto_renew=True))
    assert len(taken) == 1
    consumer.stub.NotifyClientTermination(
        svc.NotifyClientTerminationRequest(), metadata=consumer.md, timeout=10
    )
    started = time.monotonic()
    back = messages(other.receive("billing", "orders", poll_s=5))
    assert [m.system_properties.message_id for m in back] == [sent]
    assert back[0].system_properties.delivery_attempt == 2
    assert time.monotonic() - started < 3  # not the 30 s it was received for
    consumer.close()
    other.close()


def test_renewals_stop_at_their_bound(node: BrokerProcess) -> None:
    consumer, other = V2(node.target), V2(node.target)
    sent = consumer.send("orders", b"stuck").entries[0].message_id
    messages(consumer.receive("billing", "orders", invisible_s=None, auto_renew=True))
    started = time.monotonic()
    got: list[str] = []
    while not got and time.monotonic() - started < 15:
        consumer.stub.Heartbeat(svc.HeartbeatRequest(), metadata=consumer.md, timeout=10)  # connected
        got = [
            m.system_properties.message_id for m in messages(other.receive("billing", "orders", poll_s=0.5))
        ]
    assert got == [sent]
    # renewed up to the 6 s bound, then its last slice (1.5 s) ran out: back after 6-9 s, not 2 s
    assert 5.5 < time.monotonic() - started < 10
    consumer.close()
    other.close()


def _open_telemetry(v2: V2) -> tuple[object, threading.Event]:
    """A Telemetry stream kept open (as the official clients keep one) until the event is set."""
    done = threading.Event()

    def commands() -> Iterator[svc.TelemetryCommand]:
        yield svc.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER))
        done.wait(60)

    call = v2.stub.Telemetry(commands(), metadata=v2.md)
    next(iter(call))  # the settings reply: the stream is open
    return call, done


def test_a_crashed_clients_messages_come_back_soon(node: BrokerProcess) -> None:
    consumer, other = V2(node.target), V2(node.target)
    sent = consumer.send("orders", b"orphaned").entries[0].message_id
    call, done = _open_telemetry(consumer)
    assert len(messages(consumer.receive("billing", "orders", invisible_s=30, auto_renew=True))) == 1
    call.cancel()  # type: ignore[attr-defined]  # the connection is cut; the client makes no more calls
    done.set()
    started = time.monotonic()
    back = messages(other.receive("billing", "orders", poll_s=8))
    assert [m.system_properties.message_id for m in back] == [sent]
    assert time.monotonic() - started < 5  # 1 s of silence, then released: not the 30 s
    consumer.close()
    other.close()


def test_a_client_that_reconnects_keeps_its_messages(node: BrokerProcess) -> None:
    consumer, other = V2(node.target), V2(node.target)
    consumer.send("orders", b"kept")
    call, done = _open_telemetry(consumer)
    taken = messages(consumer.receive("billing", "orders", invisible_s=None, auto_renew=True))
    call.cancel()  # type: ignore[attr-defined]
    done.set()
    call, done = _open_telemetry(consumer)  # a new stream at once: it has not gone
    assert _others_get(other, 4.0) == []
    assert consumer.ack("billing", "orders", taken[0]).status.code == OK
    call.cancel()  # type: ignore[attr-defined]
    done.set()
    consumer.close()
    other.close()
