"""The broker's own work per consumed message, measured in-process with no gRPC in the way.

broker_bench's ``consume_cpu_us_per_msg`` against ``grpc_ceiling_consume_cpu_us_per_msg`` says how
much more CPU our broker spends per consumed message than the bare server, but both are end-to-end
figures on a shared machine and move by tens of percent between runs. This harness runs the same
receive/ack cycle (ReceiveMessage of 32 from any queue, then one AckMessage for them) by calling the
broker's handlers directly on a real :class:`~dataplane.broker.Broker` over a real store, and takes
the CPU time of the handlers alone (this thread's, so a busy neighbour on the machine moves it less
than it moves a rate):

- ``broker_receive_us_per_msg``  ``receive_message`` (POP from the store, receipt handles, encoding)
- ``broker_ack_us_per_msg``      ``ack_message`` (receipt handles verified, POP state, the answer)
- ``broker_trace_us_per_msg``    writing the trace events of those receives and acks to the store
- ``broker_receive_compiled_run_us_per_msg`` / ``broker_receive_python_run_us_per_msg``  the receive
                                 with the store's compiled read of a queue's run (``read_run``) and
                                 with the Python loop it stands in for, in alternating rounds of one
                                 process (medians): the same code and heap on both sides, so a
                                 difference of 10% shows where runs of separate processes differ by
                                 more than that
- ``broker_receive_filtered_us_per_msg``  the same receive under a tag filter every message passes
                                 (``bench||other``), in the same alternating rounds: what the filter
                                 adds to a receive
- ``broker_pop_compaction_ms``   how long a POP journal compaction holds the event loop with 20,000
                                 messages in flight, every queue's position changed since the last
                                 (the export and the journal's rotation; the snapshot is serialized,
                                 written and fsynced in a thread of its own)
- ``broker_pop_compaction_unchanged_ms``   the same with the positions unchanged since the last
                                 compaction (a group holding its messages and doing nothing): their
                                 parts of the last snapshot are written again as they were
- ``broker_gc_full_ms_in_flight``  one full garbage collection of this process with 400,000 messages
                                 of a group in flight (POP state only, the objects alive before it
                                 frozen as the broker freezes its start-up heap): what a group's
                                 unacked messages add to each full collection, a pause of the loop
- ``broker_index_flush_put_wait_ms``  the longest one put of a key (what each send does) waits while
                                 the IndexFile's flush (every 5 s in a broker, on a thread of its
                                 own) writes a file whose every slot page changed (30,000 keys since
                                 the last flush), puts made back to back on this thread meanwhile:
                                 how long the event loop can be held by the flush (the median of
                                 INDEX_FLUSH_ROUNDS flushes)
- ``broker_send_us_per_call``    a single-message SendMessage (as the official clients send) through
                                 the handler the server registers: the request's bytes decoded, the
                                 guard (admission, metering), the store's append (ASYNC_FLUSH), the
                                 answer serialized; what ``produce_single_msgs_per_s`` pays on top
                                 of the bare server's call
- ``broker_send_batched_us_per_msg``  the same per message of 64-message requests
- ``broker_send_unguarded_us_per_call`` / ``broker_send_guard_us_per_call``  the single send registered
                                 without the interceptor, and what the interceptor adds (admission:
                                 authentication, access check, quotas; metering), from alternating
                                 rounds of the two (medians)
- ``broker_store_put_us_per_msg`` / ``broker_store_put_cold_us_per_msg``  the store's part of a
                                 single send: a one-message ``put_messages_async`` (CommitLog
                                 append, ConsumeQueue entry, index keys) with no handler around it,
                                 back to back and with the caches evicted before each put
- ``broker_send_cold_us_per_call`` / ``broker_receive_cold_us_per_msg`` / ``broker_ack_cold_us_per_msg``
                                 the same handlers with the core's caches evicted before each call
                                 (:class:`CacheEvictor`), as a server's own work between two calls
                                 (gRPC's, the event loop's) evicts them: a call that runs back to
                                 back with the previous one finds its code and data in the caches,
                                 a call in a server does not (docs/benchmarks.md, "Slow stretches
                                 are stolen time; handlers in a server run with cold caches")

The back-to-back figures show a change's effect within a run; the cold ones what it saves in a
server. The back-to-back receive, ack and trace figures sum to the broker's part of a consumed
message's CPU, the rest of ``consume_cpu_us_per_msg`` is gRPC's (a few percent of it is the
interceptor's admission and metering, not timed here). That sum is the figure to watch when working
on the consume path: a change shows here within a run.

    uv run python -m bench.broker_work [--count N]

The send figures take ``--count`` calls (single) and ``--count`` messages (batched), after a warm-up
of a tenth of that, on a broker of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.broker_bench import GROUP, QUEUES, TOPIC, message, receive_request
from dataplane.broker import Broker
from dataplane.buffered_stream import Encoded
from dataplane.config import BrokerSettings
from dataplane.guard import Guard
from dataplane.interceptors import MessagingInterceptor
from dataplane.metadata import GroupConfig, TopicConfig
from dataplane.pop import PopState
from dataplane.services import BUFFERED_STREAMS, ENCODED_ANSWERS, MessagingServicer, consume
from dataplane.store import reader
from dataplane.store.config import MessageStoreConfig
from dataplane.store.index_file import IndexFile
from dataplane.store.message import MessageToStore
from dataplane.wire import add_servicer
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("CacheEvictor", "HandlerCall", "broker_send_figures", "broker_work_figures")

BATCH = 32  # as broker_bench's consume loop
COLD_SHARE = 8  # the cold figures take 1/8 of --count: each call is preceded by a copy of many MiB
RUN_ROUNDS = 8  # alternating rounds of the compiled and the Python read of a run, 1/8 of --count each
GUARD_ROUNDS = 4  # rounds of a single send with and without the guard, --count calls in all
INDEX_FLUSH_ROUNDS = 4  # index flushes timed for broker_index_flush_put_wait_ms


class CacheEvictor:
    """Copies a buffer of several times the core's L2 cache (8 MiB at least) when called: what the
    caller ran before is evicted from the core's caches, as other work between two calls evicts it."""

    def __init__(self) -> None:
        l2 = os.sysconf("SC_LEVEL2_CACHE_SIZE") if "SC_LEVEL2_CACHE_SIZE" in os.sysconf_names else 0
        self.size = max(8 << 20, 4 * l2)  # sysconf answers 0 or -1 where it does not know
        self._source = bytes(self.size)
        self._target = bytearray(self.size)

    def __call__(self) -> None:
        self._target[:] = self._source


class HandlerCall:
    """What the handlers ask of a gRPC call's context (its deadline, metadata and peer), for calling
    them with no gRPC in the way."""

    def time_remaining(self) -> float:
        return 10.0

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    async def abort(self, code: Any, details: str) -> None:
        raise RuntimeError(f"{code}: {details}")


class _Handlers:
    """Stands where the grpc.aio server would in ``add_servicer``: keeps the method handlers it is
    given, so the bench calls them as the server would (decoding, interceptor and all)."""

    def __init__(self) -> None:
        self.generic: list[Any] = []

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.generic.extend(handlers)

    def unary(self, method: str) -> Any:
        class Details:
            invocation_metadata = ()

        Details.method = method  # type: ignore[attr-defined]
        for generic in self.generic:
            found = generic.service(Details)
            if found is not None:
                return found
        raise LookupError(method)


def _fill(broker: Broker, count: int) -> None:
    """``count`` 1 KiB messages, 64 per put, round-robin over the queues (as broker_bench sends)."""
    body = os.urandom(1024)
    for start in range(0, count, 64):
        broker.store.put_messages(
            [
                MessageToStore(
                    TOPIC,
                    (start // 64) % QUEUES,
                    body,
                    {"TAGS": "bench", "UNIQ_KEY": f"{os.getpid():08X}{start + i:024X}"},
                )
                for i in range(min(64, count - start))
            ]
        )


async def _cycles(
    broker: Broker, count: int, evict: CacheEvictor | None = None, tags: str = "*"
) -> tuple[float, float, int]:
    """Receive and ack until ``count`` messages went through; the seconds in each handler (``evict``:
    called before each, out of the timed part; ``tags``: the receives' tag filter)."""
    request = receive_request(GROUP, TOPIC, BATCH, 60)  # the consume loop's receive
    request.filter_expression.expression = tags
    call: Any = HandlerCall()
    clock = time.thread_time  # CPU of this thread: what a neighbour takes of the machine is not counted
    receiving = acking = 0.0
    done = 0
    while done < count:
        if evict is not None:
            evict()
        started = clock()
        frames = [frame async for frame in consume.receive_message(broker, request, call, "")]
        receiving += clock() - started
        # the client's part: read the handles and ask for the ack (not timed)
        received = [
            svc.ReceiveMessageResponse.FromString(f.data).message for f in frames if isinstance(f, Encoded)
        ]
        if not received:
            raise RuntimeError(f"the broker gave nothing after {done} of {count} messages: {frames[0]}")
        ack = svc.AckMessageRequest(
            group=request.group,
            topic=request.message_queue.topic,
            entries=[
                svc.AckMessageEntry(
                    message_id=m.system_properties.message_id,
                    receipt_handle=m.system_properties.receipt_handle,
                )
                for m in received
            ],
        )
        if evict is not None:
            evict()
        started = clock()
        answer = consume.ack_message(broker, ack, "")
        acking += clock() - started
        if answer.status.code != pb.Code.OK:
            raise RuntimeError(f"ack refused: {answer.status}")
        done += len(received)
    return receiving, acking, done


async def broker_work_figures(count: int = 32_000, data_dir: Path | None = None) -> dict[str, float]:
    """The broker's in-process CPU per consumed message (see the module docstring), and
    ``broker_work_in_flight_after`` (messages still in flight afterwards: 0 when every ack held)."""
    own = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="mqbench-work-")) if data_dir is None else data_dir
    broker = Broker(BrokerSettings(data_dir=root, listen="127.0.0.1:0"))
    try:
        broker.start(asyncio.get_running_loop())
        broker.tracer.stop()  # no flushes on its own schedule: the timed one below writes every event
        broker.metadata.create_topic(TopicConfig(name=TOPIC, queue_count=QUEUES))
        broker.metadata.create_group(GroupConfig(name=GROUP))
        cold_count = max(count // COLD_SHARE, BATCH)
        run_count = max(count // RUN_ROUNDS, BATCH)
        # what each phase consumes, and the part of a last receive of 32 beyond its count
        _fill(broker, count + cold_count + 3 * RUN_ROUNDS * (run_count + BATCH) + 2 * BATCH)
        await broker.tracer.flush_async()  # the puts' own events are not the consume path's
        receiving, acking, done = await _cycles(broker, count)
        started = time.thread_time()
        await broker.tracer.flush_async()
        tracing = time.thread_time() - started
        cold_receiving, cold_acking, cold_done = await _cycles(broker, cold_count, CacheEvictor())
        runs = await _read_run_rounds(broker, run_count)
        await broker.tracer.flush_async()
        assert broker.pop is not None
        in_flight = sum(len(broker.pop.position(GROUP, TOPIC, q).in_flight) for q in range(QUEUES))
        # before the directory goes (it was measured after, and left a directory behind per run)
        compaction_ms = _compaction_ms(root / "compaction")
        unchanged_ms = _compaction_ms(root / "compaction-unchanged", changed=False)
        (root / "index").mkdir()
        index_wait_ms = _index_flush_put_wait_ms(root / "index")
        full_collection_ms = _full_collection_ms(root / "collection")
    finally:
        broker.begin_shutdown()
        broker.close()
        if own:
            shutil.rmtree(root, ignore_errors=True)
    return {
        "broker_pop_compaction_ms": compaction_ms,
        "broker_pop_compaction_unchanged_ms": unchanged_ms,
        "broker_gc_full_ms_in_flight": full_collection_ms,
        "broker_index_flush_put_wait_ms": index_wait_ms,
        "broker_receive_us_per_msg": receiving / done * 1e6,
        "broker_ack_us_per_msg": acking / done * 1e6,
        "broker_trace_us_per_msg": tracing / done * 1e6,
        "broker_receive_cold_us_per_msg": cold_receiving / cold_done * 1e6,
        "broker_receive_compiled_run_us_per_msg": runs["compiled"],
        "broker_receive_python_run_us_per_msg": runs["python"],
        "broker_receive_filtered_us_per_msg": runs["filtered"],
        "broker_ack_cold_us_per_msg": cold_acking / cold_done * 1e6,
        "broker_work_in_flight_after": float(in_flight),
    }


async def _read_run_rounds(broker: Broker, count: int) -> dict[str, float]:
    """Receive CPU us per message with the compiled read of a run, with the Python loop alone, and
    with the compiled read under a tag filter that every message passes (``filtered``: TAGS
    ``bench||other``), RUN_ROUNDS rounds of ``count`` messages each in alternation (medians)."""
    compiled = reader.compiled_read_run
    rounds: dict[str, list[float]] = {"compiled": [], "python": [], "filtered": []}
    sides = ("compiled", "python", "filtered")
    try:
        for round_ in range(RUN_ROUNDS):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                reader.compiled_read_run = None if side == "python" else compiled
                tags = "bench||other" if side == "filtered" else "*"
                receiving, _, done = await _cycles(broker, count, tags=tags)
                rounds[side].append(receiving / done * 1e6)
    finally:
        reader.compiled_read_run = compiled
    return {side: statistics.median(values) for side, values in rounds.items()}


def _stored(broker: Broker) -> int:
    """Messages in the bench topic's queues."""
    return sum(broker.store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES))


async def _us_per_call(
    call: Callable[[Any], Awaitable[None]], inputs: list[Any], warm: int, evict: CacheEvictor | None
) -> float:
    """CPU microseconds of this thread per ``await call(x)`` over ``inputs``, the first ``warm``
    untimed (``evict``: called before each, out of the timed part)."""
    clock = time.thread_time
    spent = 0.0
    for i, item in enumerate(inputs):
        if evict is not None:
            evict()
        started = clock()
        await call(item)
        if i >= warm:
            spent += clock() - started
    return spent / (len(inputs) - warm) * 1e6


async def _send_us(
    broker: Broker, calls: int, per_call: int, evict: CacheEvictor | None = None, guarded: bool = True
) -> float:
    """CPU microseconds of this thread per SendMessage call of ``per_call`` messages, through the
    handler registered as the server registers it, response serialization included (``evict``:
    called before each call, out of the timed part; ``guarded=False``: registered without the
    interceptor, so no admission or metering). Raises when the store did not take every message
    sent (the warm-up's included)."""
    handlers = _Handlers()
    guard = Guard(broker)
    add_servicer(
        handlers,  # type: ignore[arg-type]
        MessagingServicer(broker),
        service_pb2.DESCRIPTOR.services_by_name["MessagingService"],
        wrap=MessagingInterceptor(guard).wrap if guarded else None,
        buffered=BUFFERED_STREAMS,
        encoded=ENCODED_ANSWERS,
    )
    handler = handlers.unary("/apache.rocketmq.v2.MessagingService/SendMessage")
    behavior, serialize = handler.unary_unary, handler.response_serializer
    warm = max(calls // 10, 1)
    raws = [
        svc.SendMessageRequest(
            messages=[message(i * per_call + j) for j in range(per_call)]
        ).SerializeToString()
        for i in range(warm + calls)
    ]
    call: Any = HandlerCall()

    async def send(raw: bytes) -> None:
        answer = await behavior(raw, call)
        serialize(answer)
        if answer.status.code != pb.Code.OK:
            raise RuntimeError(f"send refused: {answer.status}")

    guard.start()
    before = _stored(broker)
    try:
        us = await _us_per_call(send, raws, warm, evict)
        stored = _stored(broker) - before
        if stored != len(raws) * per_call:
            raise RuntimeError(f"{len(raws) * per_call} messages sent, {stored} stored")
        return us
    finally:
        await guard.stop()


async def _guard_rounds(broker: Broker, calls: int) -> dict[str, float]:
    """A single send with and without the interceptor, ``calls`` of each in every one of GUARD_ROUNDS
    rounds (the order alternating): ``broker_send_unguarded_us_per_call`` (median) and
    ``broker_send_guard_us_per_call`` (the median of the rounds' differences: the guard's admission
    and metering of a send). Separate runs of one figure differ by more than the guard costs on a
    busy machine; the two sides of a round run next to each other."""
    rounds: dict[bool, list[float]] = {True: [], False: []}
    for round_ in range(GUARD_ROUNDS):
        for guarded in (True, False) if round_ % 2 == 0 else (False, True):
            rounds[guarded].append(await _send_us(broker, calls, 1, guarded=guarded))
    return {
        "broker_send_unguarded_us_per_call": statistics.median(rounds[False]),
        "broker_send_guard_us_per_call": statistics.median(
            with_guard - without for with_guard, without in zip(rounds[True], rounds[False], strict=True)
        ),
    }


async def _put_us(broker: Broker, calls: int, evict: CacheEvictor | None = None) -> float:
    """CPU microseconds of this thread per single-message put into the store alone
    (``put_messages_async``: CommitLog append, ConsumeQueue and index), ``evict`` as in
    :func:`_send_us`. Raises on a refused put."""
    body = os.urandom(1024)
    warm = max(calls // 10, 1)
    prefix = f"{os.getpid():08X}"
    batches = [
        [MessageToStore(TOPIC, i % QUEUES, body, {"TAGS": "bench", "UNIQ_KEY": f"{prefix}{i:024X}"})]
        for i in range(warm + calls)
    ]
    store = broker.store

    async def put(batch: list[MessageToStore]) -> None:
        result = await store.put_messages_async(batch)
        if not result.ok:
            raise RuntimeError(f"put refused: {result.status}")

    return await _us_per_call(put, batches, warm, evict)


@contextlib.asynccontextmanager
async def _send_broker() -> AsyncIterator[Broker]:
    """A broker of its own (dev mode, the bench topic) for a series of send or put runs."""
    root = Path(tempfile.mkdtemp(prefix="mqbench-send-"))
    broker = Broker(BrokerSettings(data_dir=root, listen="127.0.0.1:0", dev_mode=True))
    try:
        broker.start(asyncio.get_running_loop())
        broker.metadata.create_topic(TopicConfig(name=TOPIC, queue_count=QUEUES))
        yield broker
    finally:
        broker.begin_shutdown()
        broker.close()
        shutil.rmtree(root, ignore_errors=True)


async def broker_send_figures(count: int = 32_000) -> dict[str, float]:
    """``broker_send_us_per_call`` (``count`` single-message calls),
    ``broker_send_batched_us_per_msg`` (``count`` messages, 64 per call),
    ``broker_send_cold_us_per_call`` (an eighth of ``count`` single-message calls, caches evicted
    before each), and the store's part of a single send, ``broker_store_put_us_per_msg`` and
    ``broker_store_put_cold_us_per_msg`` (the same counts of puts), and the guard's part of a single
    send (:func:`_guard_rounds`, ``count`` calls in all). A cold run follows its warm
    run on the same broker: on a new one its first touches of the store's new files (page faults
    in the index's hash slots, say) would be counted as well, which a broker in service has paid."""
    figures: dict[str, float] = {}
    cold_calls = max(count // COLD_SHARE, 1)
    async with _send_broker() as broker:
        figures["broker_send_us_per_call"] = await _send_us(broker, count, 1)
        figures["broker_send_cold_us_per_call"] = await _send_us(broker, cold_calls, 1, CacheEvictor())
        figures |= await _guard_rounds(broker, max(count // (2 * GUARD_ROUNDS), 1))
    async with _send_broker() as broker:
        figures["broker_send_batched_us_per_msg"] = await _send_us(broker, max(count // 64, 1), 64) / 64
    async with _send_broker() as broker:  # the store alone
        figures["broker_store_put_us_per_msg"] = await _put_us(broker, count)
        figures["broker_store_put_cold_us_per_msg"] = await _put_us(broker, cold_calls, CacheEvictor())
    return figures


def _compaction_ms(where: Path, in_flight: int = 20_000, rounds: int = 5, changed: bool = True) -> float:
    """Median time the caller spends in a background compaction of a state with ``in_flight``
    messages in flight (broker_bench's queues); ``changed``: every queue's position moved on since
    the last compaction (else none did)."""
    state = PopState(where, initial_offset=lambda g, t, q: 0, on_commit=lambda g, t, q, o: None)
    per_queue = in_flight // QUEUES
    for queue in range(QUEUES):
        state.deliver_new(GROUP, TOPIC, queue, list(range(per_queue)), 2**62)
    state.compact()  # the snapshot the rounds follow
    held: list[float] = []
    for round_ in range(rounds):
        state.wait_compacted()
        if changed:
            for queue in range(QUEUES):
                state.advance(GROUP, TOPIC, queue, per_queue + round_ + 1)
        started = time.perf_counter()
        state.compact_in_background()
        held.append(time.perf_counter() - started)
    state.close()
    return statistics.median(held) * 1e3


def _index_flush_put_wait_ms(where: Path, keys: int = 30_000) -> float:
    """Median over INDEX_FLUSH_ROUNDS flushes of the longest wait of one key's put meanwhile (ms), in
    a file of the store's default size; see the module docstring."""
    config = MessageStoreConfig(store_dir=where)
    index = IndexFile(where / f"{0:020d}", config.index_hash_slot_num, config.index_max_num)
    now_ms = int(time.time() * 1000)
    offset = 0
    longest: list[float] = []
    try:
        for _ in range(INDEX_FLUSH_ROUNDS):
            index.put_keys([(os.urandom(12).hex(), offset + i) for i in range(keys)], 0, now_ms)
            offset += keys
            flushing = threading.Thread(target=index.flush)
            flushing.start()
            waits = [0.0]
            while flushing.is_alive():
                key = [(os.urandom(12).hex(), offset)]  # made before the clock starts: the put alone
                started = time.perf_counter()
                index.put_keys(key, 0, now_ms)
                waits.append(time.perf_counter() - started)
                offset += 1
                time.sleep(0.0002)  # the loop's other work between two sends
            flushing.join()
            longest.append(max(waits))
    finally:
        index.close()
    return statistics.median(longest) * 1e3


def _full_collection_ms(where: Path, in_flight: int = 400_000, rounds: int = 5) -> float:
    """Median milliseconds of one full collection with ``in_flight`` messages in flight (broker_bench's
    queues, first deliveries in receives of 32), what was alive before frozen."""
    gc.collect()
    gc.freeze()
    try:
        state = PopState(where, initial_offset=lambda g, t, q: 0, on_commit=lambda g, t, q, o: None)
        per_queue = in_flight // QUEUES
        for queue in range(QUEUES):
            for start in range(0, per_queue, BATCH):
                state.deliver_new(GROUP, TOPIC, queue, list(range(start, start + BATCH)), 2**62)
        gc.collect()  # the tuples the collector itself stops tracking, once
        held: list[float] = []
        for _ in range(rounds):
            started = time.perf_counter()
            gc.collect()
            held.append(time.perf_counter() - started)
        state.close()
        return statistics.median(held) * 1e3
    finally:
        gc.unfreeze()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=32_000, help="messages received and acked")
    args = parser.parse_args()
    figures = asyncio.run(broker_work_figures(args.count))
    figures |= asyncio.run(broker_send_figures(args.count))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
