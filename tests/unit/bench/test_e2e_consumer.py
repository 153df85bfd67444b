"""The e2e runs' consumer process (bench/e2e_consumer.py): parked consumers in another process get
what is sent, once each, and say how long each message took from its ``t0`` (and to its store
timestamp); broker_bench's split of those times at the store (``store_split``)."""

from __future__ import annotations

import asyncio
import math
import time

import grpc
import pytest

from bench.bare_grpc_server import RelayMessagingService, register
from bench.broker_bench import store_split
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
            # and is cut at the store timestamp the relay stamped, read off the wall clock in whole
            # milliseconds: up to 1 ms short of the store, which came after the send and before
            # the receipt
            assert len(receipts.to_store) == 10
            pairs = zip(receipts.latencies, receipts.to_store, strict=True)
            assert all(-1 < part <= whole for whole, part in pairs)
            assert sum(n for n, _, _ in receipts.shapes) == 20  # every message arrived once
            assert all(n >= 1 and first >= 0 and spread >= 0 for n, first, spread in receipts.shapes)
            assert receipts.cpu_s > 0

            # the same process serves the next run; with nothing sent it ends at its timeout
            await asyncio.to_thread(consumers.begin, target, "g", "t", 1, 100)
            started = time.monotonic()
            empty = await asyncio.to_thread(consumers.finish, 1, 0.3)
            assert empty.latencies == [] and empty.to_store == [] and empty.shapes == []
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


def test_store_split_takes_the_parts_before_and_after_the_store_of_the_messages_stamped() -> None:
    # 100 messages of 10 ms, 4 of them before the store, but one that took 50 ms, 45 after its
    # store; one message with no store timestamp (NaN) counts in neither part
    latencies = [10.0] * 99 + [50.0, 7.0]
    to_store = [4.0] * 99 + [5.0, math.nan]
    split = store_split(latencies, to_store)
    assert split == {"to_store_p50": 4.0, "to_store_p99": 4.0, "after_store_p50": 6.0, "after_store_p99": 6.0}
    # the slow one is past the p99 of 100; with 10 of them it is the p99
    split = store_split([10.0] * 90 + [50.0] * 10, [4.0] * 90 + [5.0] * 10)
    assert split["to_store_p99"] == 5.0 and split["after_store_p99"] == 45.0
    assert split["to_store_p50"] == 4.0 and split["after_store_p50"] == 6.0
    # a server that stamps nothing: no split, not a made-up one
    assert all(math.isnan(v) for v in store_split([10.0, 12.0], [math.nan, math.nan]).values())
