"""The broker writes ReceiveMessage and PullMessage answers with the write-buffer hint.

A broker node runs in this process (its gRPC server on loopback) so the test can count the hinted
writes: grpc's own ``_send_message`` is wrapped, not replaced, and every answer is checked whole.
The clients are the blocking ones of the other broker tests, run off the node's event loop.
Without ``buffered=`` in ``dataplane/server.py`` the count stays at zero.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from dataplane import buffered_stream
from dataplane.config import BrokerSettings
from dataplane.server import BrokerServer
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.integration.broker.conftest import V2

pytestmark = pytest.mark.integration

TOPIC, GROUP = "hinted", "hinted-g"


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[str]:
    settings = BrokerSettings(
        data_dir=tmp_path / "broker",
        listen="127.0.0.1:0",
        metrics_listen="0",
        dev_mode=True,
        metering_dir=str(tmp_path / "metering"),
    )
    server = BrokerServer(settings)
    await server.start()
    target = f"127.0.0.1:{server.port}"

    def create() -> None:
        with BrokerAdminClient(target) as admin:
            admin.create_topic(TOPIC, queue_count=1)
            admin.create_group(GROUP)

    await asyncio.to_thread(create)
    try:
        yield target
    finally:
        await server.stop()


@pytest.fixture
def hinted(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The bytes of every hinted write, in order (grpc's function still does the writing)."""
    sent: list[bytes] = []
    real = buffered_stream._send_message

    async def counting(state: Any, message: bytes, *rest: Any) -> Any:
        sent.append(message)
        return await real(state, message, *rest)

    monkeypatch.setattr(buffered_stream, "_send_message", counting)
    return sent


async def test_receive_and_pull_answers_are_hinted(node: str, hinted: list[bytes]) -> None:
    v2 = V2(node)
    try:
        bodies = [f"body-{i}".encode() * 100 for i in range(5)]
        for body in bodies:
            assert (await asyncio.to_thread(v2.send, TOPIC, body)).status.code == pb.Code.OK

        frames = await asyncio.to_thread(v2.receive, GROUP, TOPIC, batch=32)
        kinds = [frame.WhichOneof("content") for frame in frames]
        assert kinds == ["status"] + ["message"] * 5 + ["delivery_timestamp"]
        assert frames[0].status.code == pb.Code.OK
        assert [f.message.body for f in frames[1:6]] == bodies
        # the status goes out with the headers; the messages and the timestamp are hinted
        assert [svc.ReceiveMessageResponse.FromString(raw) for raw in hinted] == frames[1:]

        hinted.clear()
        pull = svc.PullMessageRequest(
            group=v2.res(GROUP),
            message_queue=pb.MessageQueue(topic=v2.res(TOPIC), id=0),
            offset=0,
            batch_size=5,
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        )
        pull.long_polling_timeout.FromSeconds(1)
        pulled = await asyncio.to_thread(lambda: list(v2.stub.PullMessage(pull, metadata=v2.md, timeout=10)))
        kinds = [frame.WhichOneof("content") for frame in pulled]
        assert kinds == ["status"] + ["message"] * 5 + ["next_offset"]
        assert pulled[-1].next_offset == 5
        assert [svc.PullMessageResponse.FromString(raw) for raw in hinted] == pulled[1:]
    finally:
        v2.close()


def _receive_writes() -> tuple[float, float]:
    """(receives observed, seconds in all) of mq_broker_receive_write_seconds so far."""
    count = REGISTRY.get_sample_value("mq_broker_receive_write_seconds_count") or 0.0
    total = REGISTRY.get_sample_value("mq_broker_receive_write_seconds_sum") or 0.0
    return count, total


async def test_a_receive_s_write_time_covers_its_whole_stream(
    node: str, hinted: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """mq_broker_receive_write_seconds times a receive from its messages taken to the last response
    handed to gRPC: with each hinted write made 20 ms slower, a receive of 5 messages (6 hinted
    writes) counts at least 120 ms; a receive that finds nothing is not counted."""
    counting = buffered_stream._send_message

    async def slow(*args: Any) -> Any:
        await asyncio.sleep(0.02)
        return await counting(*args)

    monkeypatch.setattr(buffered_stream, "_send_message", slow)
    v2 = V2(node)
    try:
        for i in range(5):
            assert (await asyncio.to_thread(v2.send, TOPIC, f"m{i}".encode())).status.code == pb.Code.OK
        before = _receive_writes()
        frames = await asyncio.to_thread(v2.receive, GROUP, TOPIC, batch=32)
        assert [f.WhichOneof("content") for f in frames].count("message") == 5
        count, total = _receive_writes()
        assert count == before[0] + 1
        assert total - before[1] >= 6 * 0.02
        empty = await asyncio.to_thread(v2.receive, GROUP, TOPIC, batch=32, poll_s=0.2)
        assert empty[0].status.code == pb.Code.MESSAGE_NOT_FOUND
        assert _receive_writes()[0] == count
    finally:
        v2.close()
