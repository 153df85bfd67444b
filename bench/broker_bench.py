"""Broker throughput and latency, side by side with NATS JetStream, RabbitMQ and a bare gRPC server.

Every party runs in its own process on this machine; the client side is this script. 1 KiB messages.
Every SendMessage this script makes carries the headers an official RocketMQ 5 client sends
(:func:`client_headers`: client id, a new request id and date-time per call, language, protocol,
version, namespace), to the bare server as to ours.
Figures (``--json PATH`` writes them):

- produce_batched_msgs_per_s     our broker, 64 messages per SendMessage, ASYNC_FLUSH
- produce_sync_flush_msgs_per_s  the same with SYNC_FLUSH (group commit)
- produce_single_msgs_per_s      one message per request, 16 in flight (as the official clients send)
- consume_msgs_per_s             ReceiveMessage batches of 32, then one AckMessage per batch, 4 loops
                                 at a time on gRPC's blocking API (threads of this process)
- consume_in_flight_msgs_per_s   the same for another group that holds ``consume_in_flight_held``
                                 messages received and not acked (20,000; 100,000 without --quick);
                                 ``consume_in_flight_vs_idle`` is its ratio to consume_msgs_per_s
- push_consume_msgs_per_s        our SDK's AsyncPushConsumer, a listener answering SUCCESS at once
                                 (8,000 messages; 50,000 without --quick); ``push_vs_consume`` is
                                 its ratio to consume_msgs_per_s (one AckMessage per receive there)
- push_consume_client_cpu_us_per_msg   ``--push-only``: this process's CPU per message in the
                                 push consumer's runs (as consume_client_cpu_us_per_msg, below, in
                                 the consume loops')
- e2e_p99_ms                     send -> receipt by a waiting consumer, paced at 5,000 msgs/s, sent
                                 through the SDK's batching producer (BatchingOptions, 1 ms delay);
                                 the median of ROUNDS runs (2 s each with --quick, 6 s without)
                                 alternating with the relay's (below), as are the figures beside it;
                                 in every e2e run this process only sends, and the consumers
                                 (``--e2e-consumers`` threads, E2E_CONSUMERS unless told; receives
                                 of 32, an ack per receive) run in a process of their own on gRPC's
                                 blocking API (bench/e2e_consumer.py)
- e2e_single_p99_ms              the same with one SendMessage per message (more calls per second
                                 than one Python gRPC client makes on 2 cores: the send queue grows)
- e2e_p99_ms_at_300_msgs_per_s   single sends paced at 300 msgs/s (below the single-send ceiling),
                                 the median of ROUNDS runs alternating with the relay's (below)
- e2e_p99_ms_at_2500_in_flight_1 / _in_flight_64   through the batching producer at 2,500 msgs/s
                                 with ``max_in_flight`` 1 (the default: a batch whose delay ran out
                                 waits while one of its topic is unanswered) and 64 (every batch
                                 leaves after its delay), in alternating rounds, medians of ROUNDS
- e2e_send_p99_ms(_at_300_msgs_per_s) / e2e_single_send_p99_ms   send -> answer in those runs
- e2e_p99_ms_first_fifth / _last_fifth   the p99 of the first and of the last fifth of that run's
                                 receipts: far apart, the consumers fell further behind as it ran
- e2e_broker_cpu / e2e_client_cpu / e2e_consumers_cpu   cores busy in the e2e_p99_ms run (broker /
                                 this process, the producer / the consumers' process), from the
                                 first send to the last receipt
- e2e_receive_batch / _first_ms / _stream_ms   in that run, per receive that returned messages: the
                                 mean count, and the medians from the call to its first message and
                                 from its first message to its last (each streamed message is one
                                 completion on each side of the call)
- e2e_receive_write_ms / e2e_receive_writes_over_5ms   in that run, our broker's receives that
                                 returned messages (``mq_broker_receive_write_seconds``): the mean
                                 time from their messages taken to the last response handed to
                                 gRPC, which takes one response per round trip through the loop, and
                                 the share of receives that took more than 5 ms; the relay's
                                 (``grpc_ceiling_e2e_receive_write_ms``, below) are timed the same way
                                 into the same histogram (its ``--metrics`` port): the write phase of
                                 the framework alone
- e2e_to_store_p50_ms / _p99_ms, e2e_after_store_p50_ms / _p99_ms   in that run, each message's time
                                 cut at its store timestamp (the consumers read it off the message;
                                 the relay stamps one as the broker does): the median and p99 of the
                                 part up to it (the producer's batching, the send, the server until
                                 it stored the message) and of the part after (until a receive took
                                 it, its stream, the consumer); whole-millisecond stamps, so the
                                 first part reads up to 1 ms short and the second as much long
- grpc_ceiling_e2e_p99_ms(_at_300_msgs_per_s) / _e2e_send_p99_ms / _e2e_server_cpu / _e2e_client_cpu
  / _e2e_consumers_cpu / _e2e_p99_ms_first_fifth / _last_fifth / _e2e_receive_batch
  / _e2e_receive_write_ms / _e2e_to_store_p99_ms / ...
                                 the e2e_p99_ms run (and the 300 msgs/s one) through the bare server
                                 in relay mode (``--relay``: messages kept in memory, handed to the
                                 next receives): the floor the framework and this client set on this
                                 machine; ``e2e_vs_grpc_ceiling`` is our p99 over it
- grpc_ceiling_msgs_per_s / grpc_ceiling_single_msgs_per_s   the bare server, same requests
- produce_batched / produce_single / grpc_ceiling(_single) rates are the medians of ROUNDS rounds
                                 run in alternation (bare, ours; ours, bare; ...), both servers up
                                 throughout, so a slower stretch of the machine falls on both sides;
                                 every round's rate is in ``*_rounds``
- (produce_single / grpc_ceiling_single / produce_batched / grpc_ceiling)_server_cpu_us_per_msg
  and _client_cpu_us_per_msg     the CPU those rounds cost per message flat out, the server's (all
                                 its threads) and this client process's: when the server is slower,
                                 both sides share each wake-up among fewer calls and pay more per call
- (grpc_ceiling_)cpu_us_per_call_at_R  server CPU per single-message SendMessage paced at R calls/s
                                 (our broker / the bare server): what each call of the e2e runs costs
- grpc_ceiling_consume_msgs_per_s  the same consume loop against the bare server, which streams a
                                 prepared message per slot and stores nothing (the framework's cost)
- (grpc_ceiling_)consume_cpu_us_per_msg / _switches_per_msg  the server's CPU and context switches
                                 (all threads) per consumed message in those consume runs
- (grpc_ceiling_)consume_client_cpu_us_per_msg   the same for this process: the client's CPU
- consume / grpc_ceiling_consume / nats_consume / nats_publish rates are the medians of ROUNDS
                                 rounds run in a rotating order (bare, ours, NATS; ours, NATS, bare;
                                 ...), every round's figures in ``*_rounds``: 10,000 messages
                                 consumed per round (66,666 without --quick), and NATS JetStream's
                                 publish and consume of 5,000 (26,666), a new stream each round,
                                 sit between ours, not minutes after them
- (grpc_ceiling_)consume_steal_share / nats_steal_share / (grpc_ceiling_)e2e_steal_share   of the
                                 CPU time the machine's vCPUs wanted during those runs, the share
                                 the hypervisor gave to others (steal; medians over the rounds;
                                 bench/procfs.py): this VM has slow stretches, and they show here
- broker_receive_us_per_msg / broker_ack_us_per_msg / broker_trace_us_per_msg   the broker's own
                                 work per consumed message in that loop, timed in-process with no
                                 gRPC (bench/broker_work.py): the broker's part of
                                 consume_cpu_us_per_msg, steadier than the end-to-end figures
- broker_receive_compiled_run_us_per_msg / broker_receive_python_run_us_per_msg   the receive with
                                 the store's compiled read of a run and with the Python loop, in
                                 alternating rounds of one process (bench/broker_work.py);
                                 broker_receive_filtered_us_per_msg the compiled read under a tag
                                 filter every message passes, in the same rounds
- broker_send_cold_us_per_call / broker_receive_cold_us_per_msg / broker_ack_cold_us_per_msg
                                 the same handlers with the core's caches evicted before each call,
                                 as a server's own work between calls evicts them (bench/broker_work.py)
- broker_pop_compaction_ms / broker_pop_compaction_unchanged_ms   how long a POP journal compaction
                                 holds the broker's event loop with 20,000 messages in flight, their
                                 positions changed since the last compaction / unchanged
                                 (bench/broker_work.py)
- broker_gc_full_ms_in_flight     one full garbage collection with 400,000 messages in flight (POP
                                 state alone, the rest frozen; bench/broker_work.py)
- broker_send_us_per_call / broker_send_batched_us_per_msg   the broker's own work per
                                 single-message SendMessage, and per message of 64-message ones,
                                 through the handler as the server registers it (decoding, guard,
                                 store append, answer), timed in-process (bench/broker_work.py)
- broker_send_unguarded_us_per_call / broker_send_guard_us_per_call   that single send without the
                                 interceptor, and the interceptor's part of it (admission, metering),
                                 from alternating rounds (bench/broker_work.py)
- broker_store_put_us_per_msg / broker_store_put_cold_us_per_msg   the store's part of that
                                 single send (a one-message put, no handler around it), back to
                                 back and with the caches evicted before each (bench/broker_work.py)
- nats_publish_msgs_per_s / nats_consume_msgs_per_s / rabbitmq_quorum_publish_msgs_per_s  peers
                                 (NATS's in the consume rounds above)
- broker_gc_pauses / _full_collections / _pauses_over_10ms / _over_25ms / _pause_ms_total / _frozen_objects
                                 the broker's garbage-collector pauses over the ASYNC_FLUSH phases
                                 (``MQ_BROKER_GC_FREEZE=false`` in the environment: without the freeze)
- broker_loop_lags_over_10ms / _over_100ms   over the same phases, how often the broker's event
                                 loop woke its 50 ms probe more than 10 / 100 ms late

``--loop`` names the servers' event loop (``uvloop`` unless told): the broker's
(``MQ_BROKER_EVENT_LOOP``) and the bare server's, so the ceiling is the same stack; ``--loop
asyncio`` measures the standard library's loop, for the side-by-side comparison in
docs/benchmarks.md. This client (ours and the peers' clients alike) runs on asyncio's loop, but for
the consume loops (against ours and the bare server alike), which use gRPC's blocking API in
threads, and the e2e runs' consumers, which use it in a process of their own: grpc.aio's client
costs about half again as much CPU per received message.

Run: ``uv run python bench/broker_bench.py [--quick] [--json PATH] [--loop uvloop|asyncio]
[--e2e-consumers N] [--consume-client blocking|aio] [--server-cpus LIST]``; ``--server-cpus``
keeps our broker (its ``cpu_affinity`` setting) and the bare server to those CPUs; ``--calls-only``
runs only the CPU-per-call phases, ``--consume-only`` only the consume loops (ROUNDS rounds of
40,000 messages alternating between the bare server and ours, medians), ``--e2e-only`` only the
e2e_p99_ms run (ROUNDS rounds alternating between the relay and ours, on a broker holding 100,000
messages), ``--single-only`` only the single-message produce rates (ROUNDS rounds of 10,000
alternating between the bare server and ours, medians), ``--push-only`` only the SDK's push consumer
(ROUNDS rounds of 20,000 alternating with the consume loop, on our broker, medians, with this
process's CPU per message in each): quick A/B runs of one path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental
import httpx
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import peers  # noqa: E402
from e2e_consumer import ConsumerProcess  # noqa: E402
from procfs import context_switches, cpu_seconds, machine_cpu_times, steal_share  # noqa: E402

from mqcloud import (  # noqa: E402
    AsyncProducer,
    AsyncPushConsumer,
    BatchingOptions,
    ClientConfig,
    ConsumeResult,
    Message,
)
from mqcloud.admin.v1 import admin_pb2, admin_pb2_grpc  # noqa: E402
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb  # noqa: E402
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc  # noqa: E402
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc as svc_grpc  # noqa: E402
from mqcloud.signing import build_metadata  # noqa: E402

BODY = os.urandom(1024)
TOPIC = "bench"
GROUP = "bench-group"
QUEUES = 8
PACED_RATES = (1000, 3000)  # single-message SendMessage calls per second, for the CPU per call
# Receives the e2e runs keep in flight (threads of the consumer process). With 4, a receive took
# 9-20 ms here from its call to its first message (the broker streams each message as its own
# send), too slow a cycle for 5,000 msgs/s: the receives came back nearly full, the consumers behind.
E2E_CONSUMERS = 8
# The client the bench's own SendMessage calls come from: no namespace, no credentials (the brokers
# here are open), as an official client of an open broker is configured.
BENCH_CLIENT = ClientConfig("bench")
BENCH_CLIENT_ID = f"bench@{os.getpid()}"


def client_headers() -> list[tuple[str, str]]:
    """The headers an official RocketMQ 5 client sends with each call (client id, a new request id
    and date-time each call, language, protocol, version, namespace): the servers read and decode
    them for every call, so the bench's calls carry them too."""
    return build_metadata(BENCH_CLIENT, BENCH_CLIENT_ID)


# The consume loops' client: "blocking" (gRPC's blocking API, threads) or "aio" (``--consume-client``).
CONSUME_CLIENT = "blocking"
ROUNDS = 3  # alternating rounds of the produce rates compared with the bare server (medians kept)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on {port}")


@contextlib.contextmanager
def process(argv: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bare_server_argv(port: int, relay_metrics: int | None = None) -> list[str]:
    """The command of the bare server on ``port`` (bench/bare_grpc_server.py); with ``relay_metrics``,
    in relay mode, serving its receives' write times on that port."""
    argv = [sys.executable, str(REPO / "bench" / "bare_grpc_server.py"), str(port)]
    if relay_metrics is not None:
        argv += ["--relay", "--metrics", str(relay_metrics)]
    return argv


@contextlib.contextmanager
def our_broker(flush: str, metrics_port: int = 0) -> Iterator[tuple[str, int]]:
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix=f"mqbench-{flush}-"))
    argv = [
        sys.executable,
        "-m",
        "cli.main",
        "broker",
        "start",
        "--data-dir",
        str(data_dir),
        "--listen",
        f"127.0.0.1:{port}",
        "--metrics-listen",
        f"127.0.0.1:{metrics_port}" if metrics_port else "0",
        "--flush",
        flush,
        # development mode: the bench creates its topic through the admin API without a token
        "--dev",
    ]
    try:
        with process(argv, port) as proc:
            target = f"127.0.0.1:{port}"
            with grpc.insecure_channel(target) as channel:
                admin = admin_pb2_grpc.BrokerAdminStub(channel)
                admin.CreateTopic(
                    admin_pb2.CreateTopicRequest(
                        topic=admin_pb2.Topic(name=TOPIC, queue_count=QUEUES, message_type=admin_pb2.NORMAL)
                    )
                )
                for group in (GROUP, GROUP + "-e2e", GROUP + "-held", GROUP + "-push"):
                    admin.CreateGroup(admin_pb2.CreateGroupRequest(group=admin_pb2.Group(name=group)))
            yield target, proc.pid
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def message(i: int, stamp_ns: int | None = None) -> pb.Message:
    props = {"t0": str(stamp_ns)} if stamp_ns is not None else {}
    return pb.Message(
        topic=pb.Resource(name=TOPIC),
        body=BODY,
        user_properties=props,
        system_properties=pb.SystemProperties(
            message_id=f"{os.getpid():08X}{i:024X}",
            message_type=pb.NORMAL,
            tag="bench",
            queue_id=i % QUEUES,
            body_encoding=pb.IDENTITY,
            born_host="127.0.0.1",
        ),
    )


@contextlib.asynccontextmanager
async def stub(target: str) -> AsyncIterator[svc_grpc.MessagingServiceStub]:
    async with grpc.aio.insecure_channel(target, options=[("grpc.max_send_message_length", 64 << 20)]) as ch:
        yield svc_grpc.MessagingServiceStub(ch)


async def produce(target: str, count: int, per_request: int, in_flight: int) -> float:
    """Send ``count`` messages, ``per_request`` per SendMessage, ``in_flight`` requests at a time."""
    requests = [
        svc.SendMessageRequest(messages=[message(i + j) for j in range(per_request)])
        for i in range(0, count, per_request)
    ]
    async with stub(target) as s:
        seconds = await send_all(s, requests, in_flight, deadline_s=30)
    return len(requests) * per_request / seconds


async def send_all(
    s: Any, requests: list[svc.SendMessageRequest], in_flight: int, deadline_s: float
) -> float:
    """Send every request, ``in_flight`` at a time; the seconds it took. Raises on a refused send."""
    queue: asyncio.Queue[svc.SendMessageRequest] = asyncio.Queue()
    for r in requests:
        queue.put_nowait(r)

    async def worker() -> None:
        while not queue.empty():
            request = queue.get_nowait()
            response = await s.SendMessage(request, timeout=deadline_s, metadata=client_headers())
            if response.status.code != pb.Code.OK:
                raise RuntimeError(f"send failed: {response.status}")

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return time.perf_counter() - started


def receive_request(group: str, topic: str, batch: int, invisible_s: int) -> svc.ReceiveMessageRequest:
    """A POP receive of up to ``batch`` messages from any queue, long-polling 2 s."""
    request = svc.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=batch,
        auto_renew=False,
    )
    request.invisible_duration.FromSeconds(invisible_s)
    request.long_polling_timeout.FromSeconds(2)
    return request


async def receive(s: Any, request: svc.ReceiveMessageRequest, deadline_s: float = 10) -> list[pb.Message]:
    """The messages of one receive call."""
    return [
        frame.message
        async for frame in s.ReceiveMessage(request, timeout=deadline_s)
        if frame.WhichOneof("content") == "message"
    ]


def ack_request(group: str, topic: str, received: list[pb.Message]) -> svc.AckMessageRequest:
    """One AckMessage for every message of ``received``."""
    entries = [
        svc.AckMessageEntry(
            message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
        )
        for m in received
    ]
    group_resource, topic_resource = pb.Resource(name=group), pb.Resource(name=topic)
    return svc.AckMessageRequest(group=group_resource, topic=topic_resource, entries=entries)


def check_acked(response: svc.AckMessageResponse, topic: str) -> None:
    """Raise when the broker refused an AckMessage."""
    if response.status.code not in (pb.Code.OK, pb.Code.MULTIPLE_RESULTS):
        raise RuntimeError(f"ack on {topic} failed: {response.status}")


async def ack(s: Any, group: str, topic: str, received: list[pb.Message], deadline_s: float = 10) -> None:
    """Ack ``received`` in one call; raise when the broker refuses."""
    check_acked(await s.AckMessage(ack_request(group, topic, received), timeout=deadline_s), topic)


def _blocking_consume(target: str, count: int, batch: int, in_flight: int, group: str) -> float:
    """The consume loop on gRPC's blocking API: ``in_flight`` threads, each receiving ``batch`` and
    acking them in one call until ``count`` messages went through; msgs/s."""
    options = [(grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]
    lock = threading.Lock()
    received = 0
    failure: list[BaseException] = []
    with grpc.insecure_channel(target, options=options) as channel:
        s = svc_grpc.MessagingServiceStub(channel)
        request = receive_request(group, TOPIC, batch, 60)

        def worker() -> None:
            nonlocal received
            try:
                while received < count and not failure:
                    got = [
                        frame.message
                        for frame in s.ReceiveMessage(request, timeout=10)
                        if frame.WhichOneof("content") == "message"
                    ]
                    if not got:
                        return
                    check_acked(s.AckMessage(ack_request(group, TOPIC, got), timeout=10), TOPIC)
                    with lock:
                        received += len(got)
            except BaseException as exc:  # noqa: BLE001 - raised again by the caller
                failure.append(exc)

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(in_flight)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
    if failure:
        raise failure[0]
    return received / seconds


async def _aio_consume(target: str, count: int, batch: int, in_flight: int, group: str) -> float:
    """The same loops on grpc.aio, as tasks of this process's event loop (``--consume-client aio``)."""
    async with stub(target) as s:
        received = 0

        async def worker() -> None:
            nonlocal received
            while received < count:
                got = await receive(s, receive_request(group, TOPIC, batch, 60))
                if not got:
                    return
                await ack(s, group, TOPIC, got)
                received += len(got)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return received / (time.perf_counter() - started)


async def consume(target: str, count: int, batch: int = 32, in_flight: int = 4, group: str = GROUP) -> float:
    """msgs/s of ``in_flight`` receive-then-ack loops, on the client :data:`CONSUME_CLIENT` names.
    By default gRPC's blocking API with ``SingleThreadedUnaryStream`` (:func:`_blocking_consume`), as
    the e2e consumers use: grpc.aio's client spent 51-62 us of CPU per received message here, about
    what the bare server did, and the blocking one 30-36 (``consume_client_cpu_us_per_msg``;
    docs/benchmarks.md, "The consume loops on gRPC's blocking API")."""
    if CONSUME_CLIENT == "aio":
        return await _aio_consume(target, count, batch, in_flight, group)
    return await asyncio.to_thread(_blocking_consume, target, count, batch, in_flight, group)


async def consume_figures(target: str, pid: int, count: int, prefix: str) -> dict[str, float]:
    """``{prefix}consume_msgs_per_s`` and what the server spent per consumed message: CPU
    (``_cpu_us_per_msg``) and context switches (``_switches_per_msg``, all its threads); and the CPU
    of this process, the client, per consumed message (``_client_cpu_us_per_msg``)."""
    cpu, switches, client = cpu_seconds(pid), context_switches(pid), time.process_time()
    times = machine_cpu_times()
    rate = await consume(target, count)
    return {
        f"{prefix}consume_msgs_per_s": rate,
        f"{prefix}consume_steal_share": steal_share(times, machine_cpu_times()),
        f"{prefix}consume_client_cpu_us_per_msg": (time.process_time() - client) / count * 1e6,
        f"{prefix}consume_cpu_us_per_msg": (cpu_seconds(pid) - cpu) / count * 1e6,
        f"{prefix}consume_switches_per_msg": (context_switches(pid) - switches) / count,
    }


async def consume_in_flight_figures(target: str, held: int, count: int) -> dict[str, float]:
    """``consume_in_flight_msgs_per_s``: the consume loop of a group that already has ``held``
    messages received and not acked (invisible for 5 minutes): a receive must not cost more with
    more messages in flight (``consume_in_flight_vs_idle`` compares it with ``consume_msgs_per_s``)."""
    group = GROUP + "-held"
    async with stub(target) as s:
        got = 0
        while got < held:
            batch = await receive(s, receive_request(group, TOPIC, 32, 300))
            if not batch:
                raise RuntimeError(f"only {got} of {held} messages to hold in flight")
            got += len(batch)
    return {
        "consume_in_flight_msgs_per_s": await consume(target, count, group=group),
        "consume_in_flight_held": float(got),
    }


async def push_consume(target: str, count: int) -> float:
    """``push_consume_msgs_per_s``: our SDK's AsyncPushConsumer (20 consumption tasks, a listener that
    answers SUCCESS at once, acks as the SDK sends them) in a group of its own, from the first
    message the listener got to the ``count``-th."""
    seen = 0
    first = last = 0.0
    done = asyncio.Event()

    async def listener(_: Any) -> ConsumeResult:
        nonlocal seen, first, last
        seen += 1
        if seen == 1:
            first = time.perf_counter()
        if seen == count:
            last = time.perf_counter()
            done.set()
        return ConsumeResult.SUCCESS

    consumer = AsyncPushConsumer(ClientConfig(target), GROUP + "-push", {TOPIC: "*"}, listener)
    async with consumer:
        await asyncio.wait_for(done.wait(), 120)
    return (count - 1) / (last - first)


async def push_rounds(target: str, count: int) -> dict[str, Any]:
    """ROUNDS rounds alternating our SDK's push consumer and the plain consume loop on ``target``,
    ``count`` messages each, and this process's CPU per message in each (``--push-only``)."""
    await produce(target, (count + 4 * 32) * ROUNDS * 2, 64, 8)
    rounds: dict[str, list[dict[str, float]]] = {"push": [], "loop": []}
    for round_ in range(ROUNDS):
        for side in ("push", "loop") if round_ % 2 == 0 else ("loop", "push"):
            started = time.process_time()
            if side == "push":
                rate = await push_consume(target, count)
            else:
                rate = await consume(target, count)
            cpu_us = (time.process_time() - started) / count * 1e6
            name = "push_consume" if side == "push" else "consume"
            rounds[side].append({f"{name}_msgs_per_s": rate, f"{name}_client_cpu_us_per_msg": cpu_us})
    results = medians(rounds)
    results["push_vs_consume"] = results["push_consume_msgs_per_s"] / results["consume_msgs_per_s"]
    return results


async def run_push_only(count: int = 20_000) -> dict[str, Any]:
    """Only the push consumer against the consume loop, on our broker (``--push-only``: quick A/B
    of the SDK's push consumer)."""
    with our_broker("async") as (target, _):
        return await push_rounds(target, count)


async def cpu_per_call(target: str, pid: int, rate: int, seconds: float) -> float:
    """Server CPU microseconds per single-message SendMessage, paced at ``rate`` calls/s.

    What one call costs the server when calls arrive spread out (as in the e2e runs), not back to
    back: the framework's share is measured the same way against the bare server."""
    count = int(rate * seconds)
    async with stub(target) as s:
        await s.SendMessage(svc.SendMessageRequest(messages=[message(0)]), timeout=10)
        before = cpu_seconds(pid)
        start = time.monotonic()
        calls = []
        for i in range(count):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            request = svc.SendMessageRequest(messages=[message(i)])
            calls.append(asyncio.ensure_future(s.SendMessage(request, timeout=30, metadata=client_headers())))
        await asyncio.gather(*calls)
        return (cpu_seconds(pid) - before) / count * 1e6


async def cpu_per_call_figures(target: str, pid: int, prefix: str) -> dict[str, float]:
    """``{prefix}cpu_us_per_call_at_R`` for each of PACED_RATES (2 s each)."""
    return {
        f"{prefix}cpu_us_per_call_at_{rate}": await cpu_per_call(target, pid, rate, 2) for rate in PACED_RATES
    }


def p99(values: list[float]) -> float:
    values = sorted(values)
    return values[max(int(len(values) * 0.99) - 1, 0)] if values else float("nan")


async def e2e_latency(
    target: str,
    consumers: ConsumerProcess,
    rate: int,
    seconds: float,
    batch_delay_ms: float | None = None,
    cpu: dict[str, float] | None = None,
    pid: int | None = None,
    drift: dict[str, float] | None = None,
    receives: dict[str, float] | None = None,
    max_in_flight: int = 1,
    split: dict[str, float] | None = None,
) -> tuple[float, float]:
    """p99 of send -> receipt in ms, with consumers long-polling while a paced producer sends; and
    p99 of send -> SendMessage answer (when the two are close, the sends queue, not the delivery).
    The consumers are ``consumers``'s threads, in a process of their own (bench/e2e_consumer.py),
    so this process only sends. With ``batch_delay_ms`` the producer is the SDK's ``AsyncProducer``
    with batching (and ``max_in_flight`` batches of the topic unanswered before one whose delay ran
    out waits). ``cpu`` gets the cores busy from the first send to the last receipt: ``broker``
    (process ``pid``), ``client`` (this process: the producer) and ``consumers`` (theirs), and
    ``steal``, the stolen share of the CPU time the machine wanted meanwhile (bench/procfs.py). ``drift``
    gets the p99 of the first and of the last fifth of the receipts (``first``, ``last``): far
    apart, the consumers fell behind. ``receives`` gets, over the receives that returned messages,
    the mean batch (``batch``) and the medians in ms from the call to its first message
    (``first_ms``) and from its first message to its last (``stream_ms``, receives of 2 or more):
    where a receive's time goes. ``split`` gets :func:`store_split` of the receipts: the part of
    each message's time before its store timestamp and the part after."""
    total = int(rate * seconds)
    sent: list[float] = []
    async with stub(target) as s:
        # Skip the backlog of earlier phases: a new group starts at the first stored message, so
        # without this the consumers drain every earlier message before the first timed one.
        for qid in range(QUEUES):
            mq = pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=qid)
            end = await s.QueryOffset(
                svc.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.QueryOffsetPolicy.END)
            )
            await s.UpdateOffset(
                svc.UpdateOffsetRequest(
                    group=pb.Resource(name=GROUP + "-e2e"), message_queue=mq, offset=end.offset
                )
            )
        await asyncio.to_thread(consumers.begin, target, GROUP + "-e2e", TOPIC)
        producer = None
        if batch_delay_ms is not None:
            options = BatchingOptions(
                max_delay_ms=batch_delay_ms, max_messages=256, max_in_flight=max_in_flight
            )
            producer = AsyncProducer(ClientConfig(target), [TOPIC], batching=options)
            await producer.start()
        await asyncio.sleep(0.5)  # consumers are parked in their long poll
        # Only messages sent from now on count: skip the backlog of earlier phases.
        interval = 1.0 / rate
        # This process's own heap (earlier phases, the sends in flight) must not pause the producer:
        # a full collection walked all of it, 15-48 ms now and then, and every message sent or
        # batched meanwhile waited, the relay's and ours alike. Frozen objects are not walked; no
        # send is kept past its answer (a list of every send's future made the collections full).
        gc.freeze()
        outstanding = {"sends": total, "failed": 0}
        in_flight: set[asyncio.Future[Any]] = set()  # (the loop keeps only weak references to tasks)
        all_answered = asyncio.Event()

        def answered(send: asyncio.Future[Any], t0: int) -> None:
            sent.append((time.monotonic_ns() - t0) / 1e6)
            in_flight.discard(send)
            failed = send.cancelled() or send.exception() is not None
            if not failed:
                response = send.result()
                failed = isinstance(response, svc.SendMessageResponse) and response.status.code != pb.Code.OK
            outstanding["failed"] += failed
            outstanding["sends"] -= 1
            if not outstanding["sends"]:
                all_answered.set()

        start = time.monotonic()
        cpu_start = (cpu_seconds(pid), time.process_time())
        times = machine_cpu_times()
        for i in range(total):
            target_t = start + i * interval
            delay = target_t - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            t0 = time.monotonic_ns()
            if producer is not None:
                sdk_message = Message(TOPIC, BODY, properties={"t0": str(t0), "seq": str(i)})
                send = producer.send_async(sdk_message)
            else:
                req = svc.SendMessageRequest(messages=[message(i, t0)])
                send = asyncio.ensure_future(s.SendMessage(req, timeout=10, metadata=client_headers()))
            in_flight.add(send)
            send.add_done_callback(lambda done, t0=t0: answered(done, t0))
        # A failed send must not abort the whole run (and lose every other figure): it is counted.
        if total:
            await all_answered.wait()
        gc.unfreeze()
        if producer is not None:
            await producer.shutdown()
        failed = outstanding["failed"]
        if failed:
            sys.stderr.write(f"e2e: {failed} of {total} sends failed\n")
            total -= failed
        sending_cpu = time.process_time() - cpu_start[1]
        receipts = await asyncio.to_thread(consumers.finish, total, 10)
    latencies = receipts.latencies
    if cpu is not None:
        elapsed = time.monotonic() - start
        cpu["broker"] = (cpu_seconds(pid) - cpu_start[0]) / elapsed
        cpu["client"] = sending_cpu / elapsed
        cpu["consumers"] = receipts.cpu_s / elapsed
        cpu["steal"] = steal_share(times, machine_cpu_times())
    shapes = receipts.shapes
    if receives is not None and shapes:
        receives["batch"] = sum(n for n, _, _ in shapes) / len(shapes)
        receives["first_ms"] = statistics.median(f for _, f, _ in shapes)
        streamed = [t for n, _, t in shapes if n >= 2]
        receives["stream_ms"] = statistics.median(streamed) if streamed else 0.0
    if split is not None:
        split.update(store_split(latencies, receipts.to_store))
    if drift is not None:
        fifth = max(len(latencies) // 5, 1)
        drift["first"], drift["last"] = p99(latencies[:fifth]), p99(latencies[-fifth:])
    return p99(latencies), p99(sent)


def store_split(latencies: list[float], to_store: list[float]) -> dict[str, float]:
    """Each message's ms split at its store timestamp (``to_store``: ms from its ``t0`` to it, NaN
    for none; ``latencies`` the whole, in the same order): the median and p99 of the part up to the
    store (``to_store_p50``, ``to_store_p99``: the producer's batching, the send call, the server
    until it stored it) and of the part after (``after_store_p50``, ``after_store_p99``: until a
    receive took it, its stream, the consumer). A store timestamp is in whole milliseconds, so the
    first part reads up to 1 ms short and the second as much long. Messages without one are left
    out; with none, NaN."""
    pairs = [(whole, part) for whole, part in zip(latencies, to_store, strict=True) if not math.isnan(part)]
    if not pairs:
        return dict.fromkeys(("to_store_p50", "to_store_p99", "after_store_p50", "after_store_p99"), math.nan)
    before = [part for _, part in pairs]
    after = [whole - part for whole, part in pairs]
    return {
        "to_store_p50": statistics.median(before),
        "to_store_p99": p99(before),
        "after_store_p50": statistics.median(after),
        "after_store_p99": p99(after),
    }


def _over(samples: list[Any], count: float, bound: str) -> float:
    """How many of a histogram's ``count`` observations were above bucket ``bound`` (cumulative)."""
    return count - sum(x.value for x in samples if x.name.endswith("_bucket") and x.labels["le"] == bound)


def metric_samples(metrics_port: int) -> dict[str, list[Any]]:
    """The samples of each metric family on the broker's /metrics, by family name."""
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def broker_metric_figures(metrics_port: int) -> dict[str, float]:
    """From one read of the broker's /metrics: its garbage-collector pauses so far
    (``mq_gc_pause_seconds``, dataplane/heap.py), the start-up objects it froze
    (``mq_gc_frozen_objects``) and how often its event loop ran late (``mq_event_loop_lag_seconds``,
    probed every 50 ms, dataplane/loop_lag.py)."""
    families = metric_samples(metrics_port)
    frozen = sum(x.value for x in families.get("mq_gc_frozen_objects", []))
    pauses = families.get("mq_gc_pause_seconds", [])
    count = sum(x.value for x in pauses if x.name.endswith("_count"))
    full = sum(x.value for x in pauses if x.name.endswith("_count") and x.labels["generation"] == "2")
    total = sum(x.value for x in pauses if x.name.endswith("_sum"))
    lags = families.get("mq_event_loop_lag_seconds", [])
    probes = sum(x.value for x in lags if x.name.endswith("_count"))
    return {
        "broker_gc_frozen_objects": frozen,
        "broker_gc_pauses": count,
        "broker_gc_full_collections": full,
        "broker_gc_pauses_over_10ms": _over(pauses, count, "0.01"),
        "broker_gc_pauses_over_25ms": _over(pauses, count, "0.025"),
        "broker_gc_pause_ms_total": total * 1000,
        "broker_loop_lags_over_10ms": _over(lags, probes, "0.01"),
        "broker_loop_lags_over_100ms": _over(lags, probes, "0.1"),
    }


def broker_work_figures(count: int) -> dict[str, float]:
    """bench/broker_work.py's figures, in a process of its own (not this one's heap and threads)."""
    argv = [sys.executable, "-m", "bench.broker_work", "--count", str(count)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, check=True, timeout=120)
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def medians(rounds: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Each figure's median over its side's rounds, and every round's value in ``<figure>_rounds``."""
    results: dict[str, Any] = {}
    for figures in rounds.values():
        for key in figures[0]:
            results[key] = statistics.median(f[key] for f in figures)
            results[f"{key}_rounds"] = [round(f[key], 3 if "share" in key else 2) for f in figures]
    return results


async def nats_figures(count: int) -> dict[str, float]:
    """NATS JetStream's publish (acked, 512 in flight) and consume of ``count`` messages, a new
    stream; and the share of the CPU time wanted meanwhile that the hypervisor took (``nats_steal_share``)."""
    times = machine_cpu_times()
    rate, stream = await peers.nats_publish(count, BODY, in_flight=512)
    consumed = await peers.nats_consume(stream, count)
    return {
        "nats_publish_msgs_per_s": rate,
        "nats_consume_msgs_per_s": consumed,
        "nats_steal_share": steal_share(times, machine_cpu_times()),
    }


async def consume_rounds(servers: list[tuple[str, str, int]], count: int, nats_count: int) -> dict[str, Any]:
    """The consume loops of ``servers`` (prefix, target, pid) and NATS JetStream's publish and
    consume, ROUNDS rounds in a rotating order, so a slow stretch of the machine falls on every
    side: the medians of :func:`consume_figures` and :func:`nats_figures` (a missing NATS is
    reported in ``nats_error`` and left out of the later rounds, not fatal)."""
    sides: list[tuple[str, str, int] | None] = [*servers, None]  # None: NATS
    rounds: dict[str, list[dict[str, float]]] = {}
    results: dict[str, Any] = {}
    for round_ in range(ROUNDS):
        for side in sides[round_ % len(sides) :] + sides[: round_ % len(sides)]:
            if side is not None:
                prefix, where, server = side
                rounds.setdefault(prefix, []).append(await consume_figures(where, server, count, prefix))
            elif "nats_error" not in results:
                try:
                    nats = await nats_figures(nats_count)
                except Exception as exc:  # noqa: BLE001 - a missing peer is reported, not fatal
                    results["nats_error"] = repr(exc)
                else:
                    rounds.setdefault("nats_", []).append(nats)
    return medians(rounds) | results


# (our figure, the bare server's, messages per request, requests in flight) of the produce rates
BATCHED = ("produce_batched_msgs_per_s", "grpc_ceiling_msgs_per_s", 64, 8)
SINGLE = ("produce_single_msgs_per_s", "grpc_ceiling_single_msgs_per_s", 1, 16)


async def produce_rounds(
    kind: tuple[str, str, int, int],
    bare_target: str,
    target: str,
    count: int,
    pids: tuple[int | None, int | None] = (None, None),
) -> dict[str, Any]:
    """One of the produce rates (:data:`BATCHED`, :data:`SINGLE`) of ``count`` messages, ROUNDS rounds
    in alternation (bare, ours; ours, bare; ...): each side's median and every round's rate. With
    the servers' ``pids`` (bare, ours), also the CPU each round cost per message, the server's
    (``..._server_cpu_us_per_msg``) and this client process's (``..._client_cpu_us_per_msg``)."""
    ours, bare_key, per_request, in_flight = kind
    rates: dict[str, list[float]] = {bare_key: [], ours: []}
    costs: dict[str, list[float]] = {}
    pair = [(bare_key, bare_target, pids[0]), (ours, target, pids[1])]
    for round_ in range(ROUNDS):
        for key, where, pid in pair if round_ % 2 == 0 else pair[::-1]:
            server, client = cpu_seconds(pid), time.process_time()
            rates[key].append(await produce(where, count, per_request, in_flight))
            if pid is not None:
                stem = key.removesuffix("_msgs_per_s")
                for side, spent in (
                    ("server", cpu_seconds(pid) - server),
                    ("client", time.process_time() - client),
                ):
                    costs.setdefault(f"{stem}_{side}_cpu_us_per_msg", []).append(spent / count * 1e6)
    results: dict[str, Any] = {}
    for key, values in rates.items():
        results[key] = statistics.median(values)
        results[f"{key}_rounds"] = [round(r) for r in values]
    for key, values in costs.items():
        results[key] = statistics.median(values)
        results[f"{key}_rounds"] = [round(v, 1) for v in values]
    return results


async def run_single_only(count: int = 10_000) -> dict[str, Any]:
    """Only the single-message produce rates, the bare server's and ours, ROUNDS rounds of ``count``
    in alternation (``--single-only``: quick A/B of the send path)."""
    port = free_port()
    with process(bare_server_argv(port), port) as bare, our_broker("async") as (target, pid):
        results = await produce_rounds(SINGLE, f"127.0.0.1:{port}", target, count, (bare.pid, pid))
    results["single_vs_bare_single"] = results[SINGLE[0]] / results[SINGLE[1]]
    return results


async def run_calls_only() -> dict[str, Any]:
    """Only the CPU-per-call phases, bare server and ours (``--calls-only``: quick A/B of the call path)."""
    port = free_port()
    with process(bare_server_argv(port), port) as bare:
        results = await cpu_per_call_figures(f"127.0.0.1:{port}", bare.pid, "grpc_ceiling_")
    with our_broker("async") as (target, pid):
        results |= await cpu_per_call_figures(target, pid, "")
    return results


async def run_consume_only(count: int = 40_000) -> dict[str, Any]:
    """Only the consume loops, the bare server's and ours, ROUNDS rounds of ``count`` messages in
    alternation: the median of each figure, and every round's in ``<figure>_rounds``
    (``--consume-only``: quick A/B of the receive path)."""
    port = free_port()
    rounds: dict[str, list[dict[str, float]]] = {"grpc_ceiling_": [], "": []}
    with process(bare_server_argv(port), port) as bare, our_broker("async") as (target, pid):
        # what our rounds consume, and the batches a round's last receives may take beyond its count
        await produce(target, (count + 4 * 32) * ROUNDS, 64, 8)
        pair = [("grpc_ceiling_", f"127.0.0.1:{port}", bare.pid), ("", target, pid)]
        for round_ in range(ROUNDS):
            for prefix, where, server in pair if round_ % 2 == 0 else pair[::-1]:
                rounds[prefix].append(await consume_figures(where, server, count, prefix))
    results = medians(rounds)
    results["consume_vs_grpc_ceiling"] = (
        results["consume_msgs_per_s"] / results["grpc_ceiling_consume_msgs_per_s"]
    )
    return results


def receive_writes(metrics_port: int) -> tuple[float, float, float]:
    """From the broker's /metrics, ``mq_broker_receive_write_seconds`` so far: (receives, seconds in
    all, receives written within 5 ms)."""
    family = metric_samples(metrics_port).get("mq_broker_receive_write_seconds", [])
    samples = {(x.name, x.labels.get("le")): x.value for x in family}
    return (
        samples.get(("mq_broker_receive_write_seconds_count", None), 0.0),
        samples.get(("mq_broker_receive_write_seconds_sum", None), 0.0),
        samples.get(("mq_broker_receive_write_seconds_bucket", "0.005"), 0.0),
    )


async def e2e_figures(
    where: str,
    consumers: ConsumerProcess,
    pid: int,
    prefix: str,
    server: str,
    seconds: float,
    metrics_port: int = 0,
) -> dict[str, float]:
    """The e2e_p99_ms run against ``where`` (5,000 msgs/s through the SDK's batching producer, 1 ms
    delay) and its figures, named with ``prefix``: the p99s (all, first and last fifth, sends), the
    cores busy (``server`` names the serving process's: ``broker`` or ``server``), the stolen share,
    the receives' shape and the split at the store (see :func:`e2e_latency`); with ``metrics_port``
    (where the server serves ``mq_broker_receive_write_seconds``: our broker, or the relay with
    ``--metrics``), how long its receives took to hand their streams to gRPC
    (``e2e_receive_write_ms``, the mean, and ``e2e_receive_writes_over_5ms``, the share that took
    longer)."""
    cpu: dict[str, float] = {}
    drift: dict[str, float] = {}
    shape: dict[str, float] = {}
    split: dict[str, float] = {}
    writes = receive_writes(metrics_port) if metrics_port else None
    high, high_send = await e2e_latency(
        where,
        consumers,
        rate=5000,
        seconds=seconds,
        batch_delay_ms=1.0,
        cpu=cpu,
        pid=pid,
        drift=drift,
        receives=shape,
        split=split,
    )
    figures = {
        f"{prefix}e2e_p99_ms": high,
        f"{prefix}e2e_send_p99_ms": high_send,
        f"{prefix}e2e_p99_ms_first_fifth": drift["first"],
        f"{prefix}e2e_p99_ms_last_fifth": drift["last"],
        f"{prefix}e2e_{server}_cpu": cpu["broker"],
        f"{prefix}e2e_client_cpu": cpu["client"],
        f"{prefix}e2e_consumers_cpu": cpu["consumers"],
        f"{prefix}e2e_steal_share": cpu["steal"],
    }
    if writes is not None:
        count, total, within = (b - a for a, b in zip(writes, receive_writes(metrics_port), strict=True))
        figures[f"{prefix}e2e_receive_write_ms"] = total / count * 1000 if count else 0.0
        figures[f"{prefix}e2e_receive_writes_over_5ms"] = (count - within) / count if count else 0.0
    figures |= {f"{prefix}e2e_{key}_ms": value for key, value in split.items()}
    return figures | {f"{prefix}e2e_receive_{key}": value for key, value in shape.items()}


async def e2e_rounds(
    pair: list[tuple[str, str, int, int]], consumers: ConsumerProcess, seconds: float
) -> dict[str, Any]:
    """The e2e_p99_ms run against each (prefix, target, pid, metrics port) of ``pair`` (ours: prefix
    "", the relay: "grpc_ceiling_"), ROUNDS rounds in alternation (a, b; b, a; ...): each figure's
    median and every round's in ``<figure>_rounds``. A run of a few seconds has one to a few hundred
    receipts past its p99, so one slow stretch of the machine moved it by half; the median of
    alternating rounds is what the other comparisons with a peer already report. The metrics port
    (0: none) is where that server's receives' write times are read (``e2e_receive_write_ms``)."""
    rounds: dict[str, list[dict[str, float]]] = {prefix: [] for prefix, _, _, _ in pair}
    for round_ in range(ROUNDS):
        for prefix, where, server, port in pair if round_ % 2 == 0 else pair[::-1]:
            name = "server" if prefix else "broker"
            rounds[prefix].append(await e2e_figures(where, consumers, server, prefix, name, seconds, port))
    return medians(rounds)


async def run_e2e_only(e2e_consumers: int = E2E_CONSUMERS, seconds: float = 6) -> dict[str, Any]:
    """Only the e2e_p99_ms run, ours and the relay's, ROUNDS rounds in alternation (medians, every
    round's in ``<figure>_rounds``), on a broker holding a backlog as the full run's does
    (``--e2e-only``: quick A/B of the delivery path)."""
    relay_port, relay_metrics = free_port(), free_port()
    metrics_port = free_port()
    with (
        process(bare_server_argv(relay_port, relay_metrics), relay_port) as relay,
        our_broker("async", metrics_port) as (target, pid),
        ConsumerProcess(e2e_consumers) as consumers,
    ):
        await produce(target, 100_000, 64, 8)
        pair = [
            ("grpc_ceiling_", f"127.0.0.1:{relay_port}", relay.pid, relay_metrics),
            ("", target, pid, metrics_port),
        ]
        results = await e2e_rounds(pair, consumers, seconds)
    results["e2e_vs_grpc_ceiling"] = results["e2e_p99_ms"] / results["grpc_ceiling_e2e_p99_ms"]
    return results


async def run(quick: bool, e2e_consumers: int = E2E_CONSUMERS) -> dict[str, Any]:
    n_batched = 30_000 if quick else 200_000
    n_single = 5_000 if quick else 40_000
    results: dict[str, Any] = {}

    port = free_port()
    metrics_port = free_port()
    relay_port, relay_metrics = free_port(), free_port()
    with (
        process(bare_server_argv(port), port) as bare,
        process(bare_server_argv(relay_port, relay_metrics), relay_port) as relay,
        our_broker("async", metrics_port) as (target, pid),
        ConsumerProcess(e2e_consumers) as consumers,
    ):
        bare_target = f"127.0.0.1:{port}"
        results |= await cpu_per_call_figures(bare_target, bare.pid, "grpc_ceiling_")
        results |= await cpu_per_call_figures(target, pid, "")
        # The rates compared with the bare server are measured in alternating rounds (bare, ours;
        # ours, bare; ...): a slower stretch of the machine falls on both sides, not on one.
        results |= await produce_rounds(BATCHED, bare_target, target, n_batched, (bare.pid, pid))
        results |= await produce_rounds(SINGLE, bare_target, target, n_single, (bare.pid, pid))
        # (a third of the messages per round that one run took before the rounds, so --quick keeps
        # within its 120 s; at least 10,000 consumed and 5,000 through NATS, for a steady rate)
        results |= await consume_rounds(
            [("grpc_ceiling_", bare_target, bare.pid), ("", target, pid)],
            max(n_batched // ROUNDS, 10_000),
            max(n_single * 2 // ROUNDS, 5_000),
        )
        # Another group, with many messages received and not acked: the stored backlog of the
        # produce phases is enough (a new group starts at the first stored message).
        results |= await consume_in_flight_figures(
            target, 20_000 if quick else 100_000, 10_000 if quick else 50_000
        )
        results["push_consume_msgs_per_s"] = await push_consume(target, 8_000 if quick else 50_000)
        # The wake-up path at a rate one broker sustains with single-message sends, then the target;
        # at 300 msgs/s in alternating rounds with the relay (the bare server keeping messages in
        # memory), whose p99 is the floor the framework and this client set: medians of ROUNDS.
        relay_target = f"127.0.0.1:{relay_port}"
        low: dict[str, list[float]] = {"": [], "grpc_ceiling_": [], "send": []}
        pair = [("", target), ("grpc_ceiling_", relay_target)]
        for round_ in range(ROUNDS):
            for prefix, where in pair if round_ % 2 == 0 else pair[::-1]:
                p99_ms, send_p99_ms = await e2e_latency(where, consumers, rate=300, seconds=1 if quick else 4)
                low[prefix].append(p99_ms)
                if where == target:
                    low["send"].append(send_p99_ms)
        for prefix in ("", "grpc_ceiling_"):
            results[f"{prefix}e2e_p99_ms_at_300_msgs_per_s"] = statistics.median(low[prefix])
            results[f"{prefix}e2e_p99_ms_at_300_msgs_per_s_rounds"] = [round(v, 2) for v in low[prefix]]
        results["e2e_send_p99_ms_at_300_msgs_per_s"] = statistics.median(low["send"])
        # What the producer's in-flight bound does under load: a rate this machine sustains (1 s runs
        # with --quick: the six runs cost about 2.5 s each, well within its 120 s).
        bounded: dict[int, list[float]] = {1: [], 64: []}
        for round_ in range(ROUNDS):
            for in_flight in (1, 64) if round_ % 2 == 0 else (64, 1):
                p99_ms, _ = await e2e_latency(
                    target,
                    consumers,
                    rate=2500,
                    seconds=1 if quick else 4,
                    batch_delay_ms=1.0,
                    max_in_flight=in_flight,
                )
                bounded[in_flight].append(p99_ms)
        for in_flight, values in bounded.items():
            results[f"e2e_p99_ms_at_2500_in_flight_{in_flight}"] = statistics.median(values)
        # The target rate through our broker and through the relay, which keeps nothing but the
        # messages in memory (the latency the framework and these clients allow on this machine),
        # in alternating rounds: medians.
        results |= await e2e_rounds(
            [("", target, pid, metrics_port), ("grpc_ceiling_", relay_target, relay.pid, relay_metrics)],
            consumers,
            2 if quick else 6,
        )
        # (1 s with --quick: its backlog drains for several seconds more on a slow machine)
        single, single_send = await e2e_latency(target, consumers, rate=5000, seconds=1 if quick else 10)
        results["e2e_single_p99_ms"] = single
        results["e2e_single_send_p99_ms"] = single_send
        results |= broker_metric_figures(metrics_port)
    with our_broker("sync") as (target, _):
        results["produce_sync_flush_msgs_per_s"] = await produce(target, n_batched // 2, 64, 8)
    # (8,000 with --quick: with 16,000 the cold figures' cache evictions took --quick to 115 s on a
    # slow VM, too close to the 120 s it keeps within)
    results |= broker_work_figures(8_000 if quick else 64_000)

    try:
        results["rabbitmq_quorum_publish_msgs_per_s"] = await peers.rabbitmq_quorum_publish(
            n_single, BODY, in_flight=512
        )
    except Exception as exc:  # noqa: BLE001
        results["rabbitmq_error"] = repr(exc)

    def ratio(a: str, b: str) -> float | None:
        return round(results[a] / results[b], 2) if a in results and b in results else None

    results["ratios"] = {
        "batched_vs_nats": ratio("produce_batched_msgs_per_s", "nats_publish_msgs_per_s"),
        "batched_vs_grpc_ceiling": ratio("produce_batched_msgs_per_s", "grpc_ceiling_msgs_per_s"),
        "sync_vs_rabbitmq_quorum": ratio(
            "produce_sync_flush_msgs_per_s", "rabbitmq_quorum_publish_msgs_per_s"
        ),
        "single_vs_bare_single": ratio("produce_single_msgs_per_s", "grpc_ceiling_single_msgs_per_s"),
        "consume_vs_nats": ratio("consume_msgs_per_s", "nats_consume_msgs_per_s"),
        "consume_vs_grpc_ceiling": ratio("consume_msgs_per_s", "grpc_ceiling_consume_msgs_per_s"),
        "consume_in_flight_vs_idle": ratio("consume_in_flight_msgs_per_s", "consume_msgs_per_s"),
        "push_vs_consume": ratio("push_consume_msgs_per_s", "consume_msgs_per_s"),
        "grpc_ceiling_consume_vs_nats": ratio("grpc_ceiling_consume_msgs_per_s", "nats_consume_msgs_per_s"),
        "e2e_in_flight_64_vs_1": ratio("e2e_p99_ms_at_2500_in_flight_64", "e2e_p99_ms_at_2500_in_flight_1"),
        # latencies: our p99 over the relay's (above 1, the broker adds to what the framework costs)
        "e2e_vs_grpc_ceiling": ratio("e2e_p99_ms", "grpc_ceiling_e2e_p99_ms"),
        "e2e_at_300_vs_grpc_ceiling": ratio(
            "e2e_p99_ms_at_300_msgs_per_s", "grpc_ceiling_e2e_p99_ms_at_300_msgs_per_s"
        ),
    }
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    return results


def main() -> None:
    global CONSUME_CLIENT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, within 120 s")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--calls-only", action="store_true", help="only the CPU-per-call phases")
    parser.add_argument("--consume-only", action="store_true", help="only the consume loops (bare, ours)")
    parser.add_argument("--e2e-only", action="store_true", help="only the e2e_p99_ms runs (relay, ours)")
    parser.add_argument(
        "--single-only", action="store_true", help="only the single-message produce rates (bare, ours)"
    )
    parser.add_argument(
        "--push-only", action="store_true", help="only the SDK's push consumer against the consume loop"
    )
    parser.add_argument(
        "--loop", choices=("uvloop", "asyncio"), default="uvloop", help="the servers' event loop"
    )
    parser.add_argument(
        "--server-cpus",
        default="",
        help="CPU list the servers keep to (our broker's cpu_affinity, the bare server's the same); "
        "default: none",
    )
    parser.add_argument(
        "--e2e-consumers",
        type=int,
        default=E2E_CONSUMERS,
        help=f"receives the e2e runs keep in flight (default {E2E_CONSUMERS})",
    )
    parser.add_argument(
        "--consume-client",
        choices=("blocking", "aio"),
        default=CONSUME_CLIENT,
        help="the consume loops' gRPC client (default blocking: threads on the blocking API)",
    )
    args = parser.parse_args()
    if args.e2e_consumers < 1:
        parser.error("--e2e-consumers must be 1 or more")
    # the broker reads it as its setting; the bare server follows the broker
    os.environ["MQ_BROKER_EVENT_LOOP"] = args.loop
    os.environ["MQ_BROKER_CPU_AFFINITY"] = args.server_cpus
    # The servers of this run place their loops among themselves (dataplane/loop_cpu.py): the bare
    # server and the broker, alive together, take a CPU each whatever else on the host noted one.
    placements = Path(tempfile.mkdtemp(prefix="mqbench-placements-")) / "loop-cpus"
    os.environ.setdefault("MQ_BROKER_LOOP_CPU_PLACEMENTS", str(placements))
    CONSUME_CLIENT = args.consume_client
    try:
        if args.calls_only:
            results = asyncio.run(run_calls_only())
        elif args.consume_only:
            results = asyncio.run(run_consume_only())
        elif args.e2e_only:
            results = asyncio.run(run_e2e_only(args.e2e_consumers))
        elif args.single_only:
            results = asyncio.run(run_single_only())
        elif args.push_only:
            results = asyncio.run(run_push_only())
        else:
            results = asyncio.run(run(args.quick, args.e2e_consumers))
    finally:
        shutil.rmtree(placements.parent, ignore_errors=True)
    results["event_loop"] = args.loop
    if args.server_cpus:
        results["server_cpus"] = args.server_cpus
    if not (args.calls_only or args.single_only):
        results["consume_client"] = args.consume_client
    if not (args.calls_only or args.consume_only or args.single_only or args.push_only):
        results["e2e_consumers"] = args.e2e_consumers
    text = json.dumps(results, indent=2, default=float)
    sys.stdout.write(text + "\n")
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
