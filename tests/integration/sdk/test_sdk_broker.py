"""The mqcloud SDK against a real broker process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from mqcloud import (
    AsyncProducer,
    AsyncPushConsumer,
    AsyncSimpleConsumer,
    BadRequestError,
    BatchingOptions,
    ConsumeResult,
    Message,
    MessageView,
    NotFoundError,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransportError,
)
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.message import FilterExpression
from tests.integration.broker.conftest import REPO_ROOT
from tests.integration.sdk.conftest import NAMESPACE, Env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _drain(
    c: SimpleConsumer, want: int, deadline_s: float = 20, invisible: float = 15, ack: bool = True
) -> list[MessageView]:
    got: list[MessageView] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < deadline:
        for m in c.receive(16, invisible):
            if ack:
                c.ack(m)
            got.append(m)
    return got


def test_round_trip_keeps_tag_keys_properties(env: Env) -> None:
    with (
        Producer(env.config, [env.topic]) as p,
        SimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        sent = {}
        for i in range(10):
            r = p.send(
                Message(
                    env.topic,
                    f"m{i}".encode(),
                    tag=f"t{i % 2}",
                    keys=[f"k{i}", "common"],
                    properties={"i": str(i), "unicode": "ü"},
                )
            )
            sent[r.message_id] = i
        got = _drain(c, 10)
        assert sorted(m.message_id for m in got) == sorted(sent)
        for m in got:
            i = sent[m.message_id]
            assert (m.body, m.tag, m.keys, m.properties, m.delivery_attempt, m.topic) == (
                f"m{i}".encode(),
                f"t{i % 2}",
                [f"k{i}", "common"],
                {"i": str(i), "unicode": "ü"},
                1,
                env.topic,
            )
            assert not m.corrupted
        assert c.receive(16, 5) == []


def test_tag_filter(env: Env) -> None:
    with (
        Producer(env.config, [env.topic]) as p,
        SimpleConsumer(env.config, env.group, {env.topic: "a||b"}, await_duration=2) as c,
    ):
        for tag in ("a", "b", "c", "a"):
            p.send(Message(env.topic, tag.encode(), tag=tag))
        got = _drain(c, 3)
        assert sorted(m.tag or "" for m in got) == ["a", "a", "b"]


def test_batch_send_and_send_async(env: Env) -> None:
    with (
        Producer(env.config, [env.topic]) as p,
        SimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        receipts = p.send_batch([Message(env.topic, f"b{i}".encode(), keys=[f"b{i}"]) for i in range(5)])
        assert len(receipts) == 5 and len({r.message_id for r in receipts}) == 5
        assert len({r.queue_id for r in receipts}) == 1
        futures = [p.send_async(Message(env.topic, f"a{i}".encode())) for i in range(5)]
        async_ids = {f.result(10).message_id for f in futures}
        got = _drain(c, 10)
        assert {m.message_id for m in got} == {r.message_id for r in receipts} | async_ids


async def test_batching_producer_coalesces_concurrent_sends(env: Env) -> None:
    """Sends within the batching delay go out as one request each per topic and group, every caller
    gets its own receipt; a bad message fails alone; FIFO groups are never mixed."""
    fifo_topic = env.new_topic("FIFO")
    options = BatchingOptions(max_delay_ms=20, max_messages=50)
    async with (
        AsyncProducer(env.config, [env.topic, fifo_topic], batching=options) as p,
        AsyncSimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        assert p.batcher is not None
        sends = [p.send(Message(env.topic, f"n{i}".encode(), keys=[f"k{i}"])) for i in range(120)]
        receipts = await asyncio.gather(*sends)
        # 120 sends in one loop turn: batches of 50, 50 and 20, each on one queue
        assert p.batcher.batches_sent == 3
        assert len({r.message_id for r in receipts}) == 120
        assert len({(r.queue_id, r.endpoint) for r in receipts[:50]}) == 1
        got: dict[str, MessageView] = {}
        deadline = time.monotonic() + 20
        while len(got) < 120 and time.monotonic() < deadline:
            for m in await c.receive(32, 15):
                await c.ack(m)
                got[m.message_id] = m
        assert {mid: m.body for mid, m in got.items()} == {
            r.message_id: f"n{i}".encode() for i, r in enumerate(receipts)
        }
        assert {m.keys[0] for m in got.values()} == {f"k{i}" for i in range(120)}
        # an empty body fails at once, alone; the others of the same moment are sent
        with pytest.raises(BadRequestError):
            await p.send(Message(env.topic, b""))
        # send_async hands out the batch's own futures (no task per message), coalesced as sends
        # are; a refused body fails its future alone
        before = p.batcher.batches_sent
        futures = [p.send_async(Message(env.topic, f"f{i}".encode())) for i in range(10)]
        refused = p.send_async(Message(env.topic, b""))
        assert not any(isinstance(f, asyncio.Task) for f in futures)
        assert len({r.message_id for r in await asyncio.gather(*futures)}) == 10
        assert p.batcher.batches_sent == before + 1
        with pytest.raises(BadRequestError):
            await refused
        # FIFO messages of two groups: one batch per group, each on its group's queue, in order
        before = p.batcher.batches_sent
        order = [g for _ in range(5) for g in "ab"]
        fifo = await asyncio.gather(
            *(p.send(Message(fifo_topic, f"{g}-{i}".encode(), message_group=g)) for i, g in enumerate(order))
        )
        assert p.batcher.batches_sent == before + 2
        for g in "ab":
            mine = [r for r, gg in zip(fifo, order, strict=True) if gg == g]
            assert len({r.queue_id for r in mine}) == 1
            assert [r.offset for r in mine] == sorted(r.offset for r in mine)
        # a lone send goes out after the delay, not later
        t0 = time.monotonic()
        await p.send(Message(env.topic, b"alone"))
        assert time.monotonic() - t0 < 2


def test_unknown_topic_raises_not_found(env: Env) -> None:
    with Producer(env.config) as p, pytest.raises(NotFoundError):
        p.send(Message("no-such-topic", b"x"))


def test_change_invisible_duration_and_redelivery(env: Env) -> None:
    with (
        Producer(env.config, [env.topic]) as p,
        SimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        mid = p.send(Message(env.topic, b"x")).message_id
        (m,) = _drain(c, 1, invisible=30, ack=False)
        old = m.receipt_handle
        c.change_invisible_duration(m, 1)
        assert m.receipt_handle and m.receipt_handle != old
        t0 = time.monotonic()
        (again,) = _drain(c, 1, ack=False)
        assert again.message_id == mid and again.delivery_attempt == 2
        assert time.monotonic() - t0 < 10
        c.ack(again)
        assert c.receive(16, 5) == []


def test_unacked_comes_back_after_invisible_time(env: Env) -> None:
    with (
        Producer(env.config, [env.topic]) as p,
        SimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        mid = p.send(Message(env.topic, b"x")).message_id
        (m,) = _drain(c, 1, invisible=2, ack=False)
        assert m.delivery_attempt == 1
        (again,) = _drain(c, 1, ack=True)
        assert (again.message_id, again.delivery_attempt) == (mid, 2)


def test_blocking_calls_are_made_on_the_callers_thread_not_through_the_clients_loop(env: Env) -> None:
    """With each client's private loop held by a callback that waits, sends, a batch send, receives,
    an invisible-time change and acks still complete: they are calls on this thread. Through the
    loop, each would wait until the callbacks gave up waiting (20 s), and ``freed`` says so."""
    held = threading.Event()
    freed: list[str] = []

    def hold(name: str) -> None:
        held.wait(20)
        freed.append(name)

    with (
        Producer(env.config, [env.topic]) as p,
        SimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        c.receive(1, 5)  # the topic's route is cached by the consumer, as by the producer's start
        p._lt().loop.call_soon_threadsafe(hold, "producer")
        c._lt().loop.call_soon_threadsafe(hold, "consumer")
        try:
            ids = {p.send(Message(env.topic, b"one")).message_id}
            batch = p.send_batch([Message(env.topic, b"two"), Message(env.topic, b"three")])
            ids |= {r.message_id for r in batch}
            got: list[MessageView] = []
            deadline = time.monotonic() + 10
            while len(got) < 3 and time.monotonic() < deadline:
                got += c.receive(16, 30)
            assert {m.message_id for m in got} == ids
            first = got[0]
            old = first.receipt_handle
            c.change_invisible_duration(first, 30)
            assert first.receipt_handle != old
            for m in got:
                c.ack(m)
            assert c.receive(16, 3) == []
            assert freed == []  # nothing above waited for the loops
        finally:
            held.set()


def test_a_blocking_send_past_its_timeout_raises_timeout_error(env: Env) -> None:
    """``timeout`` bounds the whole send on the caller's thread, retries included: with the topic's
    route pointing at a socket that accepts and never answers, TimeoutError comes after it, not
    after the request timeout (10 s) of each of the three attempts."""
    import socket

    from mqcloud.route import TopicRoute

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        with Producer(env.config, [env.topic]) as p:
            route = p.core.routes.peek(env.topic)
            assert route is not None
            queues = []
            for queue in route.queues:
                moved = pb.MessageQueue()
                moved.CopyFrom(queue)
                moved.broker.endpoints.addresses[0].port = silent.getsockname()[1]
                queues.append(moved)
            p.core.routes._routes[env.topic] = TopicRoute(env.topic, queues)
            t0 = time.monotonic()
            with pytest.raises(TimeoutError, match=r"within 1\.5 s"):
                p.send(Message(env.topic, b"x"), timeout=1.5)
            assert 1.4 < time.monotonic() - t0 < 5
    finally:
        silent.close()


async def test_async_flavour(env: Env) -> None:
    async with (
        AsyncProducer(env.config, [env.topic]) as p,
        AsyncSimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        receipts = await asyncio.gather(*(p.send(Message(env.topic, f"x{i}".encode())) for i in range(5)))
        receipts.append(await p.send_async(Message(env.topic, b"task")))
        receipts += await p.send_batch([Message(env.topic, b"b1"), Message(env.topic, b"b2")])
        got: list[MessageView] = []
        deadline = time.monotonic() + 20
        while len(got) < 8 and time.monotonic() < deadline:
            for m in await c.receive(16, 15):
                await c.ack(m)
                got.append(m)
        assert {m.message_id for m in got} == {r.message_id for r in receipts}


async def _send_many(env: Env, total: int, prefix: str) -> None:
    async with AsyncProducer(env.config, [env.topic]) as p:
        for start in range(0, total, 100):
            await p.send_batch(
                [Message(env.topic, f"{prefix}{i}".encode()) for i in range(start, start + 100)]
            )


def _listener_until(total: int) -> tuple[list[str], asyncio.Event, Any]:
    """A listener answering SUCCESS that records message ids and sets the event at the total-th."""
    seen: list[str] = []
    all_seen = asyncio.Event()

    async def listener(m: MessageView) -> ConsumeResult:
        seen.append(m.message_id)
        if len(seen) == total:
            all_seen.set()
        return ConsumeResult.SUCCESS

    return seen, all_seen, listener


async def test_push_consumer_acks_go_together_and_each_takes_effect(env: Env) -> None:
    """A push consumer's acks of one moment share an AckMessage call (mqcloud.ack_batching), and the
    broker holds nothing in flight or unconsumed afterwards: every one of them was applied."""
    total = 400
    await _send_many(env, total, "a")
    seen, all_seen, listener = _listener_until(total)
    consumer = AsyncPushConsumer(env.config, env.group, {env.topic: "*"}, listener, consumption_threads=32)
    calls: list[int] = []
    send_acks = consumer._ack_call

    async def counted(endpoint: str, request: svc.AckMessageRequest) -> object:
        calls.append(len(request.entries))
        return await send_acks(endpoint, request)

    consumer._ack_call = counted  # type: ignore[method-assign]
    async with consumer:  # leaving it waits for the settling of every message received
        await asyncio.wait_for(all_seen.wait(), 40)
    assert len(set(seen)) == total
    assert sum(calls) == total
    assert len(calls) < total // 4, calls  # one call per message before
    stats = env.admin.group_stats(f"{NAMESPACE}%{env.group}", f"{NAMESPACE}%{env.topic}")
    assert stats.in_flight == 0 and stats.lag_messages == 0


async def test_push_consumer_keeps_several_receives_open(env: Env) -> None:
    """The broker assigns the topic as one queue; the consumer keeps receives_per_queue receives
    open on it at once, and every message still arrives exactly once."""
    total = 600
    await _send_many(env, total, "r")
    seen, all_seen, listener = _listener_until(total)
    consumer = AsyncPushConsumer(env.config, env.group, {env.topic: "*"}, listener, receives_per_queue=3)
    open_now = peak = 0
    receive = consumer._receive

    async def counted(*args: Any, **kwargs: Any) -> list[MessageView]:
        nonlocal open_now, peak
        open_now += 1
        peak = max(peak, open_now)
        try:
            return await receive(*args, **kwargs)
        finally:
            open_now -= 1

    consumer._receive = counted  # type: ignore[method-assign]
    async with consumer:
        await asyncio.wait_for(all_seen.wait(), 40)
        assert len(consumer._loops) == 3  # one assignment (queue id -1), three loops on it
    assert peak >= 2
    assert len(seen) == len(set(seen)) == total


async def test_push_consumer_keeps_its_receive_threads_for_the_next_receives(env: Env) -> None:
    """Receives are made on threads kept for the next receive, not a thread started per receive:
    a consumer with one receive open at a time makes every receive on the same thread, and its
    shutdown ends that thread."""
    total = 200
    await _send_many(env, total, "k")
    seen, all_seen, listener = _listener_until(total)
    consumer = AsyncPushConsumer(env.config, env.group, {env.topic: "*"}, listener, receives_per_queue=1)
    threads: list[threading.Thread] = []  # kept alive, so no two are ever the same object
    receive_here = consumer._receive_here

    def recorded(*args: Any) -> list[MessageView]:
        threads.append(threading.current_thread())
        return receive_here(*args)

    consumer._receive_here = recorded  # type: ignore[method-assign]
    async with consumer:
        await asyncio.wait_for(all_seen.wait(), 40)
    assert len(threads) >= total // 32  # receives of at most 32 messages
    assert all(t is threads[0] for t in threads), {t.name for t in threads}
    threads[0].join(5)
    assert not threads[0].is_alive()
    assert len(seen) == len(set(seen)) == total


async def test_push_consumer_retries_a_lost_receive_with_its_attempt_id(env: Env) -> None:
    """The answer of a receive is lost (the broker delivered, the consumer saw an error): the
    consumer retries with the same attempt_id and the broker gives the same messages again, at
    once, not after their 30 s invisible time."""
    total = 100  # _send_many sends hundreds
    await _send_many(env, total, "l")
    seen, all_seen, listener = _listener_until(total)
    consumer = AsyncPushConsumer(env.config, env.group, {env.topic: "*"}, listener, receives_per_queue=1)
    receive = consumer._receive
    attempts: list[str] = []

    async def losing_the_first(queue: pb.MessageQueue, req: svc.ReceiveMessageRequest) -> list[MessageView]:
        attempts.append(req.attempt_id)
        got = await receive(queue, req)
        if len(attempts) == 1:
            assert got  # delivered by the broker, then lost on the way
            raise TransportError("connection reset", "UNAVAILABLE")
        return got

    consumer._receive = losing_the_first  # type: ignore[method-assign]
    async with consumer:
        await asyncio.wait_for(all_seen.wait(), 15)
    assert attempts[1] == attempts[0] and attempts[2] != attempts[0]
    assert len(seen) == len(set(seen)) == total


def _push_consumer_and_other_queue(
    env: Env, mine: str, other: str, listener: Any
) -> tuple[AsyncPushConsumer, pb.MessageQueue]:
    """A push consumer subscribed to ``mine`` (one receive loop), and a queue of ``other`` on the
    broker, for the test to call the consumer's receive on by hand: its own loops never touch it."""
    consumer = AsyncPushConsumer(env.config, env.group, {mine: "*"}, listener, receives_per_queue=1)
    host, port = env.broker.target.rsplit(":", 1)
    endpoints = pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=int(port))])
    queue = pb.MessageQueue(
        topic=consumer.resource(other), id=-1, broker=pb.Broker(name="b", endpoints=endpoints)
    )
    return consumer, queue


def _receive_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mqcloud-receive")]


async def test_push_consumer_receives_on_threads_and_a_cancelled_receive_takes_nothing(env: Env) -> None:
    """A push consumer's receives (not FIFO) are made on gRPC's blocking API in threads of their
    own. A receive cancelled while it long-polls cancels its call: the message sent afterwards goes
    to the next receive, not to the cancelled one; and shutting down ends a parked receive at once
    rather than after its long poll."""
    mine, other = env.new_topic(), env.new_topic()  # the consumer's receive loops are on ``mine``
    seen, _, listener = _listener_until(1)
    consumer, queue = _push_consumer_and_other_queue(env, mine, other, listener)

    def request(long_polling: float) -> svc.ReceiveMessageRequest:
        return consumer._receive_request(queue, FilterExpression("*"), 8, 30, long_polling)

    await consumer.start()
    try:
        parked = asyncio.create_task(consumer._receive(queue, request(10)))
        await asyncio.sleep(0.5)  # parked at the broker, in a receive thread
        assert _receive_threads()
        parked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await parked
        async with AsyncProducer(env.config, [other]) as producer:
            receipt = await producer.send(Message(other, b"after-the-cancel"))
        got = await consumer._receive(queue, request(5))
        assert [m.message_id for m in got] == [receipt.message_id]
        parked = asyncio.create_task(consumer._receive(queue, request(20)))
        await asyncio.sleep(0.5)
    finally:
        started = time.monotonic()
        await consumer.shutdown()
    with pytest.raises((asyncio.CancelledError, TransportError)):
        await parked
    while _receive_threads():  # the parked receive's call was cancelled with its channel
        assert time.monotonic() - started < 5, "a receive thread outlived the consumer's shutdown"
        await asyncio.sleep(0.05)
    assert seen == []  # nothing of the other topic reached the listener (nor of ``mine``: nothing sent)


async def test_a_receive_cancelled_after_its_stream_ended_has_its_messages_consumed(env: Env) -> None:
    """The other order of a cancelled receive: its stream had already brought a message (which the
    broker now keeps invisible for this client) when its loop was cancelled. The message is not
    dropped on the floor: it reaches the listener and is acked."""
    mine, other = env.new_topic(), env.new_topic()
    seen, all_seen, listener = _listener_until(1)
    consumer, queue = _push_consumer_and_other_queue(env, mine, other, listener)
    streamed, release = threading.Event(), threading.Event()
    receive_here = consumer._receive_here

    def ended_then_held(*args: Any) -> list[MessageView]:
        got = receive_here(*args)  # the stream is over: the broker handed the message out
        streamed.set()
        release.wait(10)  # the loop's cancel comes before the thread hands its messages over
        return got

    consumer._receive_here = ended_then_held  # type: ignore[method-assign]
    await consumer.start()
    try:
        async with AsyncProducer(env.config, [other]) as producer:
            receipt = await producer.send(Message(other, b"streamed-before-the-cancel"))
        request = consumer._receive_request(queue, FilterExpression("*"), 8, 30, 5)
        receiving = asyncio.create_task(consumer._receive(queue, request))
        assert await asyncio.to_thread(streamed.wait, 10)
        receiving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await receiving
        release.set()
        await asyncio.wait_for(all_seen.wait(), 10)
        assert seen == [receipt.message_id]
        deadline = time.monotonic() + 10
        while consumer.cached_message_count:  # consumed and acked: the cache is empty again
            assert time.monotonic() < deadline, "the message stayed in the consumer's cache"
            await asyncio.sleep(0.05)
    finally:
        release.set()
        await consumer.shutdown()


_NEVER_SHUT_DOWN = """
import sys, time
from mqcloud import ClientConfig, ConsumeResult, PushConsumer
target, namespace, group, topic = sys.argv[1:5]
config = ClientConfig(target, namespace=namespace)
consumer = PushConsumer(config, group, {topic: "*"}, lambda m: ConsumeResult.SUCCESS)
consumer.start()
time.sleep(1.0)  # its receives are parked in their long polls (20 s)
print("leaving", flush=True)
"""


def test_a_push_consumer_never_shut_down_does_not_hold_up_exit(env: Env) -> None:
    """The receive threads are daemons: a script that never shuts its push consumer down still exits
    at once, not after the receives' long poll."""
    topic = env.new_topic()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _NEVER_SHUT_DOWN, env.broker.target, NAMESPACE, env.group, topic],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0 and "leaving" in done.stdout, done.stderr[-2000:]
    assert time.monotonic() - started < 12  # the long poll is 20 s


async def _received_async(c: AsyncSimpleConsumer, count: int, max_messages: int = 16) -> list[MessageView]:
    """Receive until ``count`` messages came (20 s at most), each invisible for 60 s."""
    got: list[MessageView] = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        got += await c.receive(max_messages, 60)
    return got


def _received(c: SimpleConsumer, count: int) -> list[MessageView]:
    got: list[MessageView] = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        got += c.receive(16, 30)
    return got


async def test_acks_of_one_call_fail_alone(env: Env) -> None:
    """Acks sent together each get their own answer: a stale handle among them fails that ack only."""
    async with (
        AsyncProducer(env.config, [env.topic]) as p,
        AsyncSimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        await p.send_batch([Message(env.topic, f"s{i}".encode()) for i in range(10)])
        got = await _received_async(c, 10)
        # the first ack leaves alone; the rest, with the first message's handle again, go together
        results = await asyncio.gather(*(c.ack(m) for m in [*got, got[0]]), return_exceptions=True)
    assert results[:10] == [None] * 10
    assert isinstance(results[10], BadRequestError)
    assert results[10].code == pb.Code.INVALID_RECEIPT_HANDLE
    stats = env.admin.group_stats(f"{NAMESPACE}%{env.group}", f"{NAMESPACE}%{env.topic}")
    assert stats.in_flight == 0 and stats.lag_messages == 0


def test_ack_all_acks_a_receive_in_one_call_and_answers_each_message(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        Producer(env.config, [env.topic]) as p,
        SimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        sent = {r.message_id for r in p.send_batch([Message(env.topic, f"a{i}".encode()) for i in range(12)])}
        got = _received(c, 12)
        assert {m.message_id for m in got} == sent
        c.ack(got[0])  # its handle is used up: ack_all's answer for it is a refusal of its own
        calls = c._direct()
        made: list[str] = []
        unary = calls.unary

        def counted(endpoint: str, method: str, request: Any, deadline: float | None = None) -> Any:
            made.append(method)
            return unary(endpoint, method, request, deadline)

        monkeypatch.setattr(calls, "unary", counted)
        outcomes = c.ack_all(got)
        assert made == ["AckMessage"]  # one call for the twelve (one broker, one topic)
        assert outcomes[1:] == [None] * 11
        assert isinstance(outcomes[0], BadRequestError)
        assert outcomes[0].code == pb.Code.INVALID_RECEIPT_HANDLE
        # a single ack of a used-up handle raises its refusal
        with pytest.raises(BadRequestError) as refused:
            c.ack(got[1])
        assert refused.value.code == pb.Code.INVALID_RECEIPT_HANDLE
        assert c.receive(16, 3) == []
    stats = env.admin.group_stats(f"{NAMESPACE}%{env.group}", f"{NAMESPACE}%{env.topic}")
    assert stats.in_flight == 0 and stats.lag_messages == 0


async def test_async_ack_all_takes_a_call_per_256_messages(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    async with (
        AsyncProducer(env.config, [env.topic]) as p,
        AsyncSimpleConsumer(env.config, env.group, {env.topic: "*"}, await_duration=2) as c,
    ):
        await p.send_batch([Message(env.topic, f"b{i}".encode()) for i in range(300)])
        got = await _received_async(c, 300, max_messages=32)
        assert len({m.message_id for m in got}) == 300
        sizes: list[int] = []
        unary = c.rpc.unary

        async def counted(endpoint: str, method: str, request: Any, deadline: float | None = None) -> Any:
            if method == "AckMessage":  # (heartbeats go through here too)
                sizes.append(len(request.entries))
            return await unary(endpoint, method, request, deadline)

        monkeypatch.setattr(c.rpc, "unary", counted)
        assert await c.ack_all(got) == [None] * 300
        assert sizes == [256, 44]
        assert await c.receive(32, 3) == []
    stats = env.admin.group_stats(f"{NAMESPACE}%{env.group}", f"{NAMESPACE}%{env.topic}")
    assert stats.in_flight == 0 and stats.lag_messages == 0


def test_push_consumer_retries_failures_then_succeeds(env: Env) -> None:
    group = env.new_group(retry_delays_ms=[200, 200, 200])
    attempts: dict[str, list[int]] = {}
    done = threading.Event()
    lock = threading.Lock()

    def listener(m: MessageView) -> ConsumeResult:
        with lock:
            seen = attempts.setdefault(m.message_id, [])
            seen.append(m.delivery_attempt)
            if all(len(v) >= 2 for v in attempts.values()) and len(attempts) == 4:
                done.set()
            return ConsumeResult.FAILURE if len(seen) == 1 else ConsumeResult.SUCCESS

    with Producer(env.config, [env.topic]) as p:
        ids = {p.send(Message(env.topic, f"p{i}".encode())).message_id for i in range(4)}
    with PushConsumer(env.config, group, {env.topic: "*"}, listener, consumption_threads=4) as pc:
        assert done.wait(30), attempts
        time.sleep(1.5)
        assert pc.core.backoff.delay(1) == pytest.approx(0.2)
    assert set(attempts) == ids
    for seen in attempts.values():
        assert seen[:2] == [1, 2]
        assert len(seen) == 2  # acked after the second attempt: no further delivery


async def test_async_push_consumer_flow_control(env: Env) -> None:
    total = 30
    async with AsyncProducer(env.config, [env.topic]) as p:
        await p.send_batch([Message(env.topic, b"x" * 100) for _ in range(total)])
    seen: set[str] = set()
    all_seen = asyncio.Event()
    peak = 0
    consumer: AsyncPushConsumer | None = None

    async def listener(m: MessageView) -> ConsumeResult:
        nonlocal peak
        assert consumer is not None
        peak = max(peak, consumer.cached_message_count)
        await asyncio.sleep(0.05)
        seen.add(m.message_id)
        if len(seen) == total:
            all_seen.set()
        return ConsumeResult.SUCCESS

    consumer = AsyncPushConsumer(
        env.config, env.group, {env.topic: "*"}, listener, consumption_threads=2, max_cache_message_count=4
    )
    async with consumer:
        await asyncio.wait_for(all_seen.wait(), 40)
    assert len(seen) == total
    assert 1 <= peak <= 4


def test_push_consumer_byte_bound(env: Env) -> None:
    total = 20
    with Producer(env.config, [env.topic]) as p:
        p.send_batch([Message(env.topic, b"y" * 1000) for _ in range(total)])
    seen: set[str] = set()
    peaks: list[int] = []
    done = threading.Event()
    holder: list[PushConsumer] = []
    lock = threading.Lock()

    def listener(m: MessageView) -> ConsumeResult:
        time.sleep(0.05)
        with lock:
            if holder:
                peaks.append(holder[0].core.cached_message_bytes)
            seen.add(m.message_id)
            if len(seen) == total:
                done.set()
        return ConsumeResult.SUCCESS

    pc = PushConsumer(
        env.config,
        env.group,
        {env.topic: "*"},
        listener,
        consumption_threads=2,
        max_cache_message_size_bytes=3000,
    )
    holder.append(pc)
    with pc:
        assert done.wait(40)
    # The first receive knows no sizes yet and may bring a whole broker batch; once that has
    # drained below the bound, receiving resumes one estimated message at a time.
    first_below = next(i for i, b in enumerate(peaks) if b <= 3000)
    assert max(peaks[first_below:]) <= 3000 + 1000


def test_transaction_commit_delivers_and_rollback_discards(env: Env) -> None:
    topic = env.new_topic("TRANSACTION")
    group = env.new_group()
    with (
        Producer(env.config, [topic]) as p,
        SimpleConsumer(env.config, group, {topic: "*"}, await_duration=1) as c,
    ):
        committed = p.begin_transaction()
        kept = p.send(Message(topic, b"keep", tag="tx"), transaction=committed)
        rolled_back = p.begin_transaction()
        p.send(Message(topic, b"drop"), transaction=rolled_back)
        assert kept.transaction_id
        assert c.receive(16, 15) == []  # half messages are invisible
        p.commit(committed)
        p.rollback(rolled_back)
        got = _drain(c, 1, deadline_s=10)
        assert [(m.message_id, m.body, m.tag) for m in got] == [(kept.message_id, b"keep", "tx")]
        assert c.receive(16, 15) == []  # the rolled-back one never arrives
