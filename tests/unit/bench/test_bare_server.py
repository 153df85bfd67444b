"""The bench's bare server (the framework's ceiling): registered as the broker registers its
methods, and answering the calls broker_bench makes of it."""

from __future__ import annotations

import grpc
import pytest

from bench.bare_grpc_server import BareMessagingService, register
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc as svc_grpc


async def test_bare_server_answers_through_one_generic_handler() -> None:
    server = grpc.aio.server()
    register(BareMessagingService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = svc_grpc.MessagingServiceStub(channel)
            sent = await stub.SendMessage(
                svc.SendMessageRequest(
                    messages=[
                        pb.Message(system_properties=pb.SystemProperties(message_id=f"m{i}"))
                        for i in range(3)
                    ]
                )
            )
            assert [(e.message_id, e.offset) for e in sent.entries] == [("m0", 0), ("m1", 1), ("m2", 2)]
            request = svc.ReceiveMessageRequest(batch_size=5)
            frames = [f.WhichOneof("content") async for f in stub.ReceiveMessage(request)]
            assert frames == ["status"] + ["message"] * 5 + ["delivery_timestamp"]
            acked = await stub.AckMessage(
                svc.AckMessageRequest(entries=[svc.AckMessageEntry(message_id="m0")])
            )
            assert acked.status.code == pb.Code.OK and acked.entries[0].message_id == "m0"
            # methods it does not implement are unknown to it, as to any server without them
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.QueryRoute(svc.QueryRouteRequest())
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await server.stop(None)
