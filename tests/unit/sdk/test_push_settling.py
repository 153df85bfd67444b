"""How the push consumer settles what its listener accepted: the ack leaves without a coroutine
waiting for it, and the message leaves the cache once the broker answered (mqcloud.push_consumer).
The AckMessage calls are answered by the test (no broker: the consumer is never started); the
integration tests (tests/integration/sdk) run the same path against a real broker."""

from __future__ import annotations

import asyncio
import logging

import pytest

from mqcloud import AsyncPushConsumer, ClientConfig, ConsumeResult
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.errors import TransportError
from mqcloud.message import MessageView

OK = pb.Status(code=pb.Code.OK)


def view(i: int) -> MessageView:
    return MessageView(
        message_id=f"m{i}",
        topic="t",
        body=b"x" * 100,
        tag=None,
        keys=[],
        properties={},
        message_group=None,
        delivery_timestamp=None,
        born_host="h",
        born_timestamp=0.0,
        delivery_attempt=1,
        receipt_handle=f"h{i}",
        queue_id=0,
        queue_offset=i,
        endpoint="e1",
    )


def consumer_with_acks(
    answers: list[Exception | pb.Status], **options: int
) -> tuple[AsyncPushConsumer, list[int]]:
    """A consumer whose listener accepts everything and whose AckMessage calls get ``answers`` in
    turn (an exception: the call is lost; a status: every entry's), then OK; the list gets each
    call's entry count."""
    calls: list[int] = []

    async def ack_call(endpoint: str, request: svc.AckMessageRequest) -> svc.AckMessageResponse:
        calls.append(len(request.entries))
        answer = answers.pop(0) if answers else OK
        if isinstance(answer, Exception):
            raise answer
        entries = [svc.AckMessageResultEntry(message_id=e.message_id, status=answer) for e in request.entries]
        return svc.AckMessageResponse(status=answer, entries=entries)

    consumer = AsyncPushConsumer(
        ClientConfig("127.0.0.1:1"), "g", {"t": "*"}, lambda m: ConsumeResult.SUCCESS, **options
    )
    consumer._executor = None  # the listener runs on the loop: the test needs no thread pool
    consumer._ack_call = ack_call  # type: ignore[method-assign]
    return consumer, calls


async def until_empty(consumer: AsyncPushConsumer) -> None:
    """Until every message accepted has left the cache (5 s at most)."""
    for _ in range(500):
        if not consumer.cached_message_count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{consumer.cached_message_count} messages stayed in the cache")


def lost() -> TransportError:
    return TransportError("AckMessage to e1: unavailable", "UNAVAILABLE")


async def test_an_ack_lost_twice_is_tried_again_and_the_message_leaves_the_cache_when_acked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumer, calls = consumer_with_acks([lost(), lost()])
    consumer._accept([view(0)])
    assert consumer.cached_message_count == 1
    await until_empty(consumer)
    assert calls == [1, 1, 1]  # two lost calls, the third answered
    assert consumer.cached_message_bytes == 0 and not consumer._inflight
    assert "settling" not in caplog.text


async def test_an_ack_lost_every_time_or_refused_is_given_up_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumer, calls = consumer_with_acks([lost(), lost(), lost()])
    with caplog.at_level(logging.WARNING, "mqcloud.push_consumer"):
        consumer._accept([view(0)])
        await until_empty(consumer)
    assert calls == [1, 1, 1]  # ACK_ATTEMPTS tries, no more
    assert "settling message m0 failed" in caplog.text
    caplog.clear()
    stale = pb.Status(code=pb.Code.INVALID_RECEIPT_HANDLE, message="receipt handle is stale")
    consumer, calls = consumer_with_acks([stale])
    with caplog.at_level(logging.WARNING, "mqcloud.push_consumer"):
        consumer._accept([view(1)])
        await until_empty(consumer)
    assert calls == [1]  # refused by the broker: not tried again
    assert "settling message m1 failed" in caplog.text


async def test_room_freed_by_acks_wakes_a_receive_loop_waiting_for_it() -> None:
    consumer, calls = consumer_with_acks([], max_cache_message_count=4)
    gate = asyncio.Event()

    async def held(m: MessageView) -> ConsumeResult:
        await gate.wait()
        return ConsumeResult.SUCCESS

    consumer.listener = held
    consumer._accept([view(i) for i in range(4)])
    waiting = asyncio.create_task(consumer._wait_room())
    await asyncio.sleep(0.05)
    assert not waiting.done()  # the cache is full until the listener lets go
    gate.set()
    await asyncio.wait_for(waiting, 5)
    await until_empty(consumer)
    assert sum(calls) == 4


async def test_a_fifo_ack_is_waited_for_through_the_same_retries() -> None:
    """A FIFO group's ack is waited for (its next message waits): the same tries as any ack, the
    last one's error raised to the caller."""
    consumer, calls = consumer_with_acks([lost(), lost()])
    await asyncio.wait_for(consumer._ack_with_retry(view(0)), 5)
    assert calls == [1, 1, 1]
    consumer, calls = consumer_with_acks([lost(), lost(), lost()])
    with pytest.raises(TransportError):
        await asyncio.wait_for(consumer._ack_with_retry(view(1)), 5)
    assert calls == [1, 1, 1]
