"""The bench's bare server (the framework's ceiling): registered as the broker registers its
methods, and answering the calls broker_bench makes of it."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from bench.bare_grpc_server import BareMessagingService, RelayMessagingService, register
from dataplane.metrics import RECEIVE_WRITE
from mqcloud import AsyncProducer, ClientConfig, Message
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


async def test_relay_hands_what_the_sdk_sends_to_a_waiting_receive() -> None:
    """``--relay`` (the e2e floor): the SDK's producer finds a route and sends through it, and a
    receive parked in its long poll is woken by the send and gets the messages, in order, once."""
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    register(RelayMessagingService(port), server)
    await server.start()
    producer = AsyncProducer(ClientConfig(f"127.0.0.1:{port}"), ["t"])
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = svc_grpc.MessagingServiceStub(channel)
            request = svc.ReceiveMessageRequest(batch_size=8)
            request.long_polling_timeout.FromSeconds(5)

            async def receive() -> list[pb.Message]:
                return [f.message async for f in stub.ReceiveMessage(request) if f.HasField("message")]

            parked = asyncio.ensure_future(receive())
            await asyncio.sleep(0.2)
            assert not parked.done()
            await producer.start()
            started = time.monotonic()
            for i in range(3):
                await producer.send(Message("t", b"x", properties={"i": str(i)}))
            got = await asyncio.wait_for(parked, 5)
            assert time.monotonic() - started < 2  # woken by the send, not by the poll's end
            got += await receive() if len(got) < 3 else []
            assert [m.user_properties["i"] for m in got] == ["0", "1", "2"]
            assert len({m.system_properties.receipt_handle for m in got}) == 3
            # nothing is left: an empty poll answers MESSAGE_NOT_FOUND when its time runs out
            request.long_polling_timeout.FromMilliseconds(100)
            frames = [f async for f in stub.ReceiveMessage(request)]
            assert [f.status.code for f in frames] == [pb.Code.MESSAGE_NOT_FOUND]
    finally:
        await producer.shutdown()
        await server.stop(None)


async def test_relay_times_its_receives_writes_as_the_broker_does() -> None:
    """The relay's receives that hand out messages go into ``mq_broker_receive_write_seconds``, the
    histogram the broker times its own into (broker_bench reads both: the framework's write phase
    beside ours); one that found nothing is not timed, as the broker's is not."""
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    relay = RelayMessagingService(port)
    register(relay, server)
    await server.start()
    writes = RECEIVE_WRITE.labels()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = svc_grpc.MessagingServiceStub(channel)
            request = svc.ReceiveMessageRequest(batch_size=8)
            request.long_polling_timeout.FromMilliseconds(100)
            before = sum(writes.counts)
            assert [f.status.code async for f in stub.ReceiveMessage(request)] == [pb.Code.MESSAGE_NOT_FOUND]
            assert sum(writes.counts) == before
            await stub.SendMessage(svc.SendMessageRequest(messages=[pb.Message(body=b"x")] * 3))
            sum_before = writes.sum
            frames = [f.WhichOneof("content") async for f in stub.ReceiveMessage(request)]
            assert frames == ["status"] + ["message"] * 3 + ["delivery_timestamp"]
            assert sum(writes.counts) == before + 1
            assert writes.sum > sum_before
    finally:
        await server.stop(None)
