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
