"""The broker writes ReceiveMessage and PullMessage answers with the write-buffer hint.

A broker node runs in this process (its gRPC server on loopback) so the test can count the hinted
writes: grpc's own ``_send_message`` is wrapped, not replaced, and every answer is checked whole.
Without ``buffered=`` in ``dataplane/server.py`` the count stays at zero.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from dataplane import buffered_stream
from dataplane.config import BrokerSettings
from dataplane.server import BrokerServer
from mqcloud.admin.v1 import admin_pb2, admin_pb2_grpc
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc as svc_grpc

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
    async with grpc.aio.insecure_channel(target) as channel:
        admin = admin_pb2_grpc.BrokerAdminStub(channel)
        await admin.CreateTopic(
            admin_pb2.CreateTopicRequest(
                topic=admin_pb2.Topic(name=TOPIC, queue_count=1, message_type=admin_pb2.NORMAL)
            )
        )
        await admin.CreateGroup(admin_pb2.CreateGroupRequest(group=admin_pb2.Group(name=GROUP)))
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


def _message(i: int) -> pb.Message:
    return pb.Message(
        topic=pb.Resource(name=TOPIC),
        body=f"body-{i}".encode() * 100,
        system_properties=pb.SystemProperties(
            message_id=f"ID{i:030d}", tag="t", message_type=pb.NORMAL, body_encoding=pb.IDENTITY
        ),
    )


async def test_receive_and_pull_answers_are_hinted(node: str, hinted: list[bytes]) -> None:
    async with grpc.aio.insecure_channel(node) as channel:
        stub = svc_grpc.MessagingServiceStub(channel)
        sent = await stub.SendMessage(svc.SendMessageRequest(messages=[_message(i) for i in range(5)]))
        assert sent.status.code == pb.Code.OK

        request = svc.ReceiveMessageRequest(
            group=pb.Resource(name=GROUP),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=-1),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            batch_size=32,
            auto_renew=False,
        )
        request.invisible_duration.FromSeconds(30)
        request.long_polling_timeout.FromSeconds(1)
        frames = [frame async for frame in stub.ReceiveMessage(request, timeout=10)]
        kinds = [frame.WhichOneof("content") for frame in frames]
        assert kinds == ["status"] + ["message"] * 5 + ["delivery_timestamp"]
        assert frames[0].status.code == pb.Code.OK
        assert [f.message.body for f in frames[1:6]] == [f"body-{i}".encode() * 100 for i in range(5)]
        # the status goes out with the headers; the messages and the timestamp are hinted
        assert len(hinted) == 6
        assert [svc.ReceiveMessageResponse.FromString(raw) for raw in hinted] == frames[1:]

        hinted.clear()
        pull = svc.PullMessageRequest(
            group=pb.Resource(name=GROUP),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=0),
            offset=0,
            batch_size=5,
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        )
        pull.long_polling_timeout.FromSeconds(1)
        pulled = [frame async for frame in stub.PullMessage(pull, timeout=10)]
        assert [frame.WhichOneof("content") for frame in pulled] == ["status"] + ["message"] * 5 + [
            "next_offset"
        ]
        assert pulled[-1].next_offset == 5
        assert len(hinted) == 6
