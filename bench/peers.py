"""Peer brokers measured side by side with ours: NATS JetStream and RabbitMQ quorum queues.

Both use their own well-kept Python clients (nats-py, aio-pika) with acknowledged publishes and the
same message size and in-flight window as our runs, so the ratio compares brokers, not client tricks.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

__all__ = ("nats_consume", "nats_publish", "rabbitmq_quorum_publish")

NATS_URL = os.environ.get("BENCH_NATS_URL", "nats://127.0.0.1:4222")
AMQP_URL = os.environ.get("BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


async def _bounded(count: int, in_flight: int, op) -> float:  # type: ignore[no-untyped-def]
    """Run ``op(i)`` for i in range(count) with at most ``in_flight`` outstanding; return seconds."""
    sem = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with sem:
            await op(i)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - started


async def nats_publish(count: int, body: bytes, in_flight: int) -> tuple[float, str]:
    """JetStream file-storage stream, acked publish; returns (msgs/s, stream name)."""
    import nats
    from nats.js.api import StorageType, StreamConfig

    nc = await nats.connect(NATS_URL, connect_timeout=3, max_reconnect_attempts=0)
    js = nc.jetstream()
    stream = f"BENCH_{uuid.uuid4().hex[:8]}"
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"], storage=StorageType.FILE))
    subject = f"{stream}.msgs"

    async def op(_: int) -> None:
        await js.publish(subject, body)

    seconds = await _bounded(count, in_flight, op)
    await nc.close()
    return count / seconds, stream


async def nats_consume(stream: str, count: int, batch: int = 32) -> float:
    """Pull consumer fetching ``batch`` at a time and acking each message; returns msgs/s."""
    import nats

    nc = await nats.connect(NATS_URL, connect_timeout=3, max_reconnect_attempts=0)
    js = nc.jetstream()
    sub = await js.pull_subscribe(f"{stream}.msgs", durable="bench")
    received = 0
    started = time.perf_counter()
    while received < count:
        msgs = await sub.fetch(batch, timeout=5)
        for msg in msgs:
            await msg.ack()
        received += len(msgs)
    seconds = time.perf_counter() - started
    await js.delete_stream(stream)
    await nc.close()
    return received / seconds


async def rabbitmq_quorum_publish(count: int, body: bytes, in_flight: int) -> float:
    """Durable quorum queue, persistent messages, publisher confirms; returns msgs/s."""
    import aio_pika

    connection = await aio_pika.connect(AMQP_URL, timeout=3)
    channel = await connection.channel(publisher_confirms=True)
    queue_name = f"bench-{uuid.uuid4().hex[:8]}"
    queue = await channel.declare_queue(queue_name, durable=True, arguments={"x-queue-type": "quorum"})
    exchange = channel.default_exchange

    async def op(_: int) -> None:
        await exchange.publish(
            aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT), routing_key=queue_name
        )

    seconds = await _bounded(count, in_flight, op)
    await queue.delete(if_unused=False, if_empty=False)
    await connection.close()
    return count / seconds
