"""The SDK's ack coalescing (mqcloud.ack_batching) with a send function the test answers by hand."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mqcloud.ack_batching import MAX_ACK_ENTRIES, AckCoalescer
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.errors import BadRequestError, IllegalStateError, TransportError

GROUP = pb.Resource(name="g")
TOPIC_A = pb.Resource(name="a")
TOPIC_B = pb.Resource(name="b")
OK = pb.Status(code=pb.Code.OK, message="OK")


class Broker:
    """Records each AckMessage call and answers it when the test says so."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, svc.AckMessageRequest, asyncio.Future[Any]]] = []

    async def send(self, endpoint: str, request: svc.AckMessageRequest) -> Any:
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.calls.append((endpoint, request, answer))
        return await answer

    @staticmethod
    def all_ok(request: svc.AckMessageRequest) -> svc.AckMessageResponse:
        entries = [svc.AckMessageResultEntry(message_id=e.message_id, status=OK) for e in request.entries]
        return svc.AckMessageResponse(status=OK, entries=entries)


def entry(i: int) -> svc.AckMessageEntry:
    return svc.AckMessageEntry(message_id=f"m{i}", receipt_handle=f"h{i}")


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def ack_soon(acks: AckCoalescer, i: int, topic: pb.Resource = TOPIC_A) -> asyncio.Future[None]:
    """Ack message i (endpoint e1) in a task of its own, and let the coalescer act on it."""
    future = asyncio.ensure_future(acks.ack("e1", GROUP, topic, entry(i)))
    await settle()
    return future


async def test_an_ack_alone_leaves_at_once_and_later_ones_wait_for_its_answer() -> None:
    broker = Broker()
    acks = AckCoalescer(broker.send)
    first = asyncio.ensure_future(acks.ack("e1", GROUP, TOPIC_A, entry(0)))
    await settle()
    assert len(broker.calls) == 1 and [e.message_id for e in broker.calls[0][1].entries] == ["m0"]
    # while that call is unanswered, the next acks of the key collect
    rest = [asyncio.ensure_future(acks.ack("e1", GROUP, TOPIC_A, entry(i))) for i in range(1, 6)]
    await settle()
    assert len(broker.calls) == 1
    assert not any(f.done() for f in [first, *rest])
    broker.calls[0][2].set_result(Broker.all_ok(broker.calls[0][1]))
    await settle()
    assert first.done() and first.result() is None
    # ... and leave together, in one call, as soon as it is answered
    assert len(broker.calls) == 2
    request = broker.calls[1][1]
    assert [e.message_id for e in request.entries] == [f"m{i}" for i in range(1, 6)]
    assert request.group.name == "g" and request.topic.name == "a"
    broker.calls[1][2].set_result(Broker.all_ok(request))
    await asyncio.gather(*rest)
    await acks.close()


async def test_keys_do_not_wait_for_each_other() -> None:
    broker = Broker()
    acks = AckCoalescer(broker.send)
    waiting = [
        asyncio.ensure_future(acks.ack("e1", GROUP, TOPIC_A, entry(0))),
        asyncio.ensure_future(acks.ack("e1", GROUP, TOPIC_B, entry(1))),
        asyncio.ensure_future(acks.ack("e2", GROUP, TOPIC_A, entry(2))),
    ]
    await settle()
    assert sorted((ep, r.topic.name) for ep, r, _ in broker.calls) == [("e1", "a"), ("e1", "b"), ("e2", "a")]
    for _, request, answer in broker.calls:
        answer.set_result(Broker.all_ok(request))
    await asyncio.gather(*waiting)


async def test_each_ack_gets_its_own_entrys_status() -> None:
    broker = Broker()
    acks = AckCoalescer(broker.send)
    blocker = await ack_soon(acks, 0)
    batch = [asyncio.ensure_future(acks.ack("e1", GROUP, TOPIC_A, entry(i))) for i in range(1, 4)]
    broker.calls[0][2].set_result(Broker.all_ok(broker.calls[0][1]))
    await settle()
    request, answer = broker.calls[1][1], broker.calls[1][2]
    response = Broker.all_ok(request)
    response.status.code = pb.Code.MULTIPLE_RESULTS
    response.entries[1].status.code = pb.Code.INVALID_RECEIPT_HANDLE
    response.entries[1].status.message = "receipt handle is stale"
    answer.set_result(response)
    results = await asyncio.gather(*batch, return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], BadRequestError) and results[1].code == pb.Code.INVALID_RECEIPT_HANDLE
    await blocker


async def test_a_failed_call_fails_every_ack_it_carried_and_the_next_ones_still_go() -> None:
    broker = Broker()
    acks = AckCoalescer(broker.send)
    first = await ack_soon(acks, 0)
    second = await ack_soon(acks, 1)
    broker.calls[0][2].set_exception(TransportError("AckMessage to e1: unavailable", "UNAVAILABLE"))
    with pytest.raises(TransportError):
        await first
    await settle()
    assert len(broker.calls) == 2  # the ack that waited still left
    broker.calls[1][2].set_result(Broker.all_ok(broker.calls[1][1]))
    assert await second is None


async def test_an_answer_without_an_entry_per_ack_is_taken_whole() -> None:
    broker = Broker()
    acks = AckCoalescer(broker.send)
    one = await ack_soon(acks, 0)
    broker.calls[0][2].set_result(svc.AckMessageResponse(status=OK))  # no entries: the call's status
    assert await one is None
    two = await ack_soon(acks, 1)
    mixed = svc.AckMessageResponse(status=pb.Status(code=pb.Code.MULTIPLE_RESULTS, message="some failed"))
    broker.calls[1][2].set_result(mixed)  # which ones failed is not said: an error, not a success
    with pytest.raises(IllegalStateError):
        await two


async def test_calls_carry_at_most_max_ack_entries() -> None:
    broker = Broker()
    acks = AckCoalescer(broker.send)
    blocker = await ack_soon(acks, 0)
    many = [
        asyncio.ensure_future(acks.ack("e1", GROUP, TOPIC_A, entry(i)))
        for i in range(1, 2 * MAX_ACK_ENTRIES + 2)
    ]
    await settle()
    for _ in range(4):
        _, request, answer = broker.calls[-1]
        if not answer.done():
            answer.set_result(Broker.all_ok(request))
        await settle()
    sizes = [len(r.entries) for _, r, _ in broker.calls]
    assert sizes == [1, MAX_ACK_ENTRIES, MAX_ACK_ENTRIES, 1]
    await asyncio.gather(blocker, *many)


async def test_close_waits_for_the_calls_then_cancels_what_is_left() -> None:
    broker = Broker()
    acks = AckCoalescer(broker.send)
    first = await ack_soon(acks, 0)
    second = await ack_soon(acks, 1)
    broker.calls[0][2].set_result(Broker.all_ok(broker.calls[0][1]))
    await acks.close(wait_s=0.2)  # the second call is never answered: cancelled at the deadline
    assert first.done() and first.result() is None
    assert len(broker.calls) == 2
    with pytest.raises(asyncio.CancelledError):
        await second
    assert not acks._tasks


async def test_an_ack_with_a_function_is_told_its_outcome_once_without_a_waiter() -> None:
    """``ack_then``: no coroutine waits; the function gets None for an ack that went through, its
    entry's error for one refused, the call's error for a call lost as a whole, and CancelledError
    for the acks still collected or in a call when the coalescer is closed at its deadline."""
    broker = Broker()
    acks = AckCoalescer(broker.send)
    told: dict[int, list[BaseException | None]] = {}

    def ack(i: int) -> None:
        acks.ack_then("e1", GROUP, TOPIC_A, entry(i), lambda error: told.setdefault(i, []).append(error))

    ack(0)
    ack(1)
    ack(2)
    await settle()
    assert [len(r.entries) for _, r, _ in broker.calls] == [1] and not told  # 1 and 2 collect
    broker.calls[0][2].set_result(Broker.all_ok(broker.calls[0][1]))
    await settle()
    assert told == {0: [None]}
    response = Broker.all_ok(broker.calls[1][1])
    response.status.code = pb.Code.MULTIPLE_RESULTS
    response.entries[0].status.code = pb.Code.INVALID_RECEIPT_HANDLE
    broker.calls[1][2].set_result(response)
    await settle()
    assert told[2] == [None]
    assert len(told[1]) == 1 and isinstance(told[1][0], BadRequestError)
    ack(3)
    await settle()
    broker.calls[2][2].set_exception(TransportError("AckMessage to e1: unavailable", "UNAVAILABLE"))
    await settle()
    assert len(told[3]) == 1 and isinstance(told[3][0], TransportError)
    ack(4)  # its call is never answered
    await settle()
    ack(5)  # collected behind it
    await acks.close(wait_s=0.2)
    assert len(told[4]) == 1 and isinstance(told[4][0], asyncio.CancelledError)
    assert len(told[5]) == 1 and isinstance(told[5][0], asyncio.CancelledError)
    assert sorted(told) == [0, 1, 2, 3, 4, 5] and all(len(v) == 1 for v in told.values())
