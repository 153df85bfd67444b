"""The e2e runs' consumer process (bench/e2e_consumer.py): parked consumers in another process get
what is sent, once each, and say how long each message took from its ``t0``."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from bench.bare_grpc_server import RelayMessagingService, register
from bench.e2e_consumer import ConsumerProcess
from mqcloud import AsyncProducer, ClientConfig, Message


async def test_parked_consumers_in_their_own_process_time_every_message_once() -> None:
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    register(RelayMessagingService(port), server)
    await server.start()
    target = f"127.0.0.1:{port}"
    producer = AsyncProducer(ClientConfig(target), ["t"])
    try:
        with ConsumerProcess() as consumers:
            await asyncio.to_thread(consumers.begin, target, "g", "t", 2, 200)
            await producer.start()
            stamps = []
            for i in range(20):
                stamps.append(time.monotonic_ns())
                # Only stamped ones are timed. The last one sent is stamped: once it arrived, the
                # relay had handed out every earlier one too (in order), so none is still on its way.
                properties = {"t0": str(stamps[-1])} if i % 2 == 1 else {}
                await producer.send(Message("t", b"x", properties=properties))
            receipts = await asyncio.to_thread(consumers.finish, 10, 10)
            assert len(receipts.latencies) == 10
            # a message's time runs from its own stamp to a receipt after it was sent
            assert all(0 < ms < (time.monotonic_ns() - stamps[1]) / 1e6 for ms in receipts.latencies)
            assert sum(n for n, _, _ in receipts.shapes) == 20  # every message arrived once
            assert all(n >= 1 and first >= 0 and spread >= 0 for n, first, spread in receipts.shapes)
            assert receipts.cpu_s > 0

            # the same process serves the next run; with nothing sent it ends at its timeout
            await asyncio.to_thread(consumers.begin, target, "g", "t", 1, 100)
            started = time.monotonic()
            empty = await asyncio.to_thread(consumers.finish, 1, 0.3)
            assert empty.latencies == [] and empty.shapes == []
            assert 0.3 <= time.monotonic() - started < 5
            # a finish with no run is refused in words, and the process goes on serving
            with pytest.raises(RuntimeError, match="finish without begin"):
                consumers.finish(1, 0.1)
            await asyncio.to_thread(consumers.begin, target, "g", "t", 1, 100)
            # as is a second begin while a run is on; the run goes on and finishes as usual
            with pytest.raises(RuntimeError, match="begin while a run is on"):
                consumers.begin(target, "g", "t", 1, 100)
            assert (await asyncio.to_thread(consumers.finish, 0, 1)).latencies == []
    finally:
        await producer.shutdown()
        await server.stop(None)
