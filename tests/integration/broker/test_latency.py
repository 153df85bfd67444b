"""Long-poll latency regressions: a short poll is a real poll, and a send wakes it at once."""

from __future__ import annotations

import threading
import time

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
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
