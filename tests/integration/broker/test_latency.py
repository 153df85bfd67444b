"""Long-poll latency regressions: a short poll is a real poll, and a send wakes it at once."""

from __future__ import annotations

import threading
import time

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.integration.broker.conftest import V2, messages, status_code

pytestmark = pytest.mark.integration


def _setup(admin: BrokerAdminClient) -> None:
    admin.create_topic("lat", namespace="acme", queue_count=4)
    admin.create_group("glat", namespace="acme")


def test_short_long_poll_waits_instead_of_spinning(admin: BrokerAdminClient, v2: V2) -> None:
    # A 1 s poll used to lose the whole 1 s to the deadline margin and answer at once, so consumers
    # with short polls spun on empty receives.
    _setup(admin)
    started = time.monotonic()
    responses = v2.receive("glat", "lat", poll_s=1)
    elapsed = time.monotonic() - started
    assert status_code(responses) == pb.Code.MESSAGE_NOT_FOUND
    assert 0.8 <= elapsed < 4


def test_send_wakes_short_long_poll_promptly(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    result: dict[str, object] = {}

    def poll() -> None:
        result["responses"] = v2.receive("glat", "lat", poll_s=1)
        result["done"] = time.monotonic()

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(0.3)
    sent = time.monotonic()
    v2.send("lat", b"wake")
    thread.join(10)
    assert [m.body for m in messages(result["responses"])] == [b"wake"]  # type: ignore[arg-type]
    # answered when the message arrived, not when the 1 s poll ran out
    assert result["done"] - sent < 0.5  # type: ignore[operator]


def test_burst_of_concurrent_sends_is_queued_not_cancelled(admin: BrokerAdminClient, v2: V2) -> None:
    # gRPC C-core cancels calls pending beyond grpc.server.max_pending_requests (default 1000); a
    # burst of single-message sends (e.g. a paced producer behind the broker) came back CANCELLED.
    _setup(admin)
    futures = []
    for i in range(2500):
        sp = pb.SystemProperties(message_id=f"BURST{i:027d}", message_type=pb.MessageType.NORMAL)
        msg = pb.Message(topic=v2.res("lat"), body=b"x", system_properties=sp)
        request = svc.SendMessageRequest(messages=[msg])
        futures.append(v2.stub.SendMessage.future(request, metadata=v2.md, timeout=60))
    codes = [f.result().status.code for f in futures]
    assert codes == [pb.Code.OK] * len(futures)


def _park(
    v2: V2, results: dict[str, tuple[float, list[pb.Message]]], name: str, **kwargs: object
) -> threading.Thread:
    """Start a receive in a thread; its (answer time, messages) land in ``results[name]``."""

    def poll() -> None:
        responses = v2.receive("glat", "lat", **kwargs)  # type: ignore[arg-type]
        results[name] = (time.monotonic(), messages(responses))

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(0.3)  # parked before the next one: wakes go to the longest-parked member first
    return thread


def test_wake_goes_on_while_a_member_takes_a_full_batch(admin: BrokerAdminClient, v2: V2) -> None:
    # Three members receiving one message at a time, three messages in one send: each member gets
    # one at once (the first takes a full batch, so it hands the wake on, and so does the second).
    _setup(admin)
    results: dict[str, tuple[float, list[pb.Message]]] = {}
    threads = [_park(v2, results, name, poll_s=8, batch=1) for name in ("m1", "m2", "m3")]
    batch = [
        pb.Message(
            topic=v2.res("lat"),
            body=f"m{i}".encode(),
            system_properties=pb.SystemProperties(
                message_id=f"BATCH{i:027d}", message_type=pb.MessageType.NORMAL, queue_id=i % 4
            ),
        )
        for i in range(3)
    ]
    sent = time.monotonic()
    response = v2.stub.SendMessage(svc.SendMessageRequest(messages=batch), metadata=v2.md, timeout=10)
    assert response.status.code == pb.Code.OK
    for thread in threads:
        thread.join(10)
    bodies = sorted(m.body for _, got in results.values() for m in got)
    assert bodies == [b"m0", b"m1", b"m2"]
    assert max(done for done, _ in results.values()) - sent < 1.5


def test_one_message_goes_to_the_longest_parked_member(admin: BrokerAdminClient, v2: V2) -> None:
    # Every member parked on the topic used to be woken by each new message: a pop pass per member
    # per message. Now one is; the others stay parked (and answer when their own poll ends).
    _setup(admin)
    results: dict[str, tuple[float, list[pb.Message]]] = {}
    threads = [_park(v2, results, f"m{i}", poll_s=3) for i in range(4)]
    sent = time.monotonic()
    v2.send("lat", b"one")
    threads[0].join(10)  # the longest-parked member takes it
    done, got = results["m0"]
    assert [m.body for m in got] == [b"one"] and done - sent < 1.5
    for thread in threads[1:]:
        thread.join(10)
    assert all(results[f"m{i}"][1] == [] for i in range(1, 4))
