"""FIFO consume throughput with 1,000 message groups, side by side with a NORMAL topic.

One broker process (ASYNC_FLUSH) holds two topics of 8 queues with the same messages: ``fifo``
(FIFO, 1,000 message groups, each on the queue sha256(group) mod 8 as the SDKs pick it) and
``normal``. The consumer is the same for both (``--workers`` concurrent ReceiveMessage loops,
batches of 32, one AckMessage per batch) and each round consumes both topics with fresh consumer
groups, alternating which goes first, so the ratio compares the two in the same broker at the same
time. FIFO order is checked on the way: per message group, messages must come in the order they were
stored (queue offsets increasing; the producer keeps 8 requests in flight, so with few message groups
two requests carrying the same group may be stored in either order, and send order is not the
reference), and every sequence number exactly once.

Figures (``--json PATH`` writes them):

- fifo_consume_msgs_per_s / normal_consume_msgs_per_s   all rounds: messages / seconds consuming
- fifo_vs_normal_consume_ratio                          the two above; target >= 0.5 (issue 5)
- rounds[]                                              each round's two rates and their ratio
- fifo_produce_msgs_per_s / normal_produce_msgs_per_s   64 per SendMessage, 8 in flight
- fifo_order_violations / fifo_duplicates / fifo_missing  must all be 0

Run: ``uv run python -m bench.fifo_bench [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import itertools
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from bench.broker_bench import BODY, ack, free_port, process, receive, receive_request, send_all, stub
from mqcloud.admin.v1 import admin_pb2, admin_pb2_grpc
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

QUEUES = 8
BATCH = 32
FIFO, NORMAL = "fifo", "normal"
STALL_S = 60.0  # a consumer with no progress for this long gives up (and the run reports what is missing)


@contextlib.contextmanager
def broker() -> Iterator[str]:
    """``mqctl broker start`` with ASYNC_FLUSH in development mode (an open admin API), on loopback."""
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="mqbench-fifo-"))
    argv = [
        sys.executable, "-m", "cli.main", "broker", "start", "--data-dir", str(data_dir),
        "--listen", f"127.0.0.1:{port}", "--metrics-listen", "0", "--flush", "async", "--dev",
    ]  # fmt: skip
    try:
        with process(argv, port):
            yield f"127.0.0.1:{port}"
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def message_group(i: int, groups: int) -> str:
    return f"mg-{i % groups:04d}"


def queue_of(group: str) -> int:
    return int.from_bytes(hashlib.sha256(group.encode()).digest(), "big") % QUEUES


def message(topic: str, i: int, groups: int) -> pb.Message:
    """Message ``i``: the same body and properties on both topics; FIFO ones carry their group."""
    mg = message_group(i, groups)
    sp = pb.SystemProperties(
        message_id=f"{os.getpid():08X}{i:024X}",
        message_type=pb.FIFO if topic == FIFO else pb.NORMAL,
        tag="bench",
        queue_id=queue_of(mg) if topic == FIFO else i % QUEUES,
        body_encoding=pb.IDENTITY,
        born_host="127.0.0.1",
    )
    if topic == FIFO:
        sp.message_group = mg
    return pb.Message(
        topic=pb.Resource(name=topic),
        body=BODY,
        user_properties={"mg": mg, "seq": str(i // groups)},
        system_properties=sp,
    )


async def produce(target: str, topic: str, count: int, groups: int, per_request: int = 64) -> float:
    """Send ``count`` messages round-robin over the message groups; returns msgs/s."""
    requests = [
        svc.SendMessageRequest(
            messages=[message(topic, i, groups) for i in range(j, min(j + per_request, count))]
        )
        for j in range(0, count, per_request)
    ]
    async with stub(target) as s:
        return count / await send_all(s, requests, 8, deadline_s=60)


async def consume(target: str, topic: str, group: str, count: int, workers: int) -> dict[str, Any]:
    """Drain ``topic`` as ``group``; returns the rate and, per message group, what was received:
    (queue offset, sequence number) in delivery order."""
    seen: dict[str, list[tuple[int, int]]] = {}
    received = 0
    last_progress = time.monotonic()
    async with stub(target) as s:

        async def worker() -> None:
            nonlocal received, last_progress
            request = receive_request(group, topic, BATCH, 120)
            while received < count and time.monotonic() - last_progress < STALL_S:
                got = await receive(s, request)
                # recorded before the ack: the next of a message group is delivered only after this
                # one is acked, so each list is in delivery order
                for m in got:
                    seen.setdefault(m.user_properties["mg"], []).append(
                        (m.system_properties.queue_offset, int(m.user_properties["seq"]))
                    )
                if not got:
                    continue
                await ack(s, group, topic, got, deadline_s=30)
                received += len(got)
                last_progress = time.monotonic()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        elapsed = time.perf_counter() - started
    return {"received": received, "seconds": elapsed, "seen": seen}


def check_order(seen: dict[str, list[tuple[int, int]]], count: int, groups: int) -> dict[str, int]:
    """Violations (a message of a group stored before the one delivered ahead of it: a queue offset
    lower than one before it), duplicates and missing messages (by sequence number)."""
    violations = duplicates = 0
    for received in seen.values():
        violations += sum(1 for (a, _), (b, _) in itertools.pairwise(received) if b < a)
        duplicates += len(received) - len({seq for _, seq in received})
    expected = {(message_group(i, groups), i // groups) for i in range(count)}
    got = {(mg, seq) for mg, received in seen.items() for _, seq in received}
    return {"violations": violations, "duplicates": duplicates, "missing": len(expected - got)}


def create(target: str, topics: list[tuple[str, int]], groups: list[tuple[str, bool]]) -> None:
    with grpc.insecure_channel(target) as channel:
        admin = admin_pb2_grpc.BrokerAdminStub(channel)
        for name, kind in topics:
            admin.CreateTopic(
                admin_pb2.CreateTopicRequest(
                    topic=admin_pb2.Topic(name=name, queue_count=QUEUES, message_type=kind)
                )
            )
        for name, fifo in groups:
            admin.CreateGroup(admin_pb2.CreateGroupRequest(group=admin_pb2.Group(name=name, fifo=fifo)))


async def run(count: int, groups: int, rounds: int, workers: int) -> dict[str, Any]:
    results: dict[str, Any] = {"count": count, "message_groups": groups, "workers": workers, "batch": BATCH}
    with broker() as target:
        create(target, [(FIFO, admin_pb2.FIFO), (NORMAL, admin_pb2.NORMAL)], [])
        results["normal_produce_msgs_per_s"] = round(await produce(target, NORMAL, count, groups))
        results["fifo_produce_msgs_per_s"] = round(await produce(target, FIFO, count, groups))
        totals = {FIFO: [0, 0.0], NORMAL: [0, 0.0]}
        order = {"violations": 0, "duplicates": 0, "missing": 0}
        results["rounds"] = []
        for r in range(rounds):
            create(target, [], [(f"fifo-g{r}", True), (f"normal-g{r}", False)])
            row: dict[str, Any] = {}
            for topic in (NORMAL, FIFO) if r % 2 == 0 else (FIFO, NORMAL):
                out = await consume(target, topic, f"{topic}-g{r}", count, workers)
                totals[topic][0] += out["received"]
                totals[topic][1] += out["seconds"]
                row[f"{topic}_msgs_per_s"] = round(out["received"] / out["seconds"])
                if topic == FIFO:
                    for k, v in check_order(out["seen"], count, groups).items():
                        order[k] += v
                elif out["received"] < count:
                    order["missing"] += count - out["received"]
            row["ratio"] = round(row["fifo_msgs_per_s"] / row["normal_msgs_per_s"], 2)
            results["rounds"].append(row)
            sys.stderr.write(f"round {r}: {row}\n")
    for topic in (FIFO, NORMAL):
        results[f"{topic}_consume_msgs_per_s"] = round(totals[topic][0] / totals[topic][1])
    results["fifo_vs_normal_consume_ratio"] = round(
        results["fifo_consume_msgs_per_s"] / results["normal_consume_msgs_per_s"], 2
    )
    results["fifo_order_violations"] = order["violations"]
    results["fifo_duplicates"] = order["duplicates"]
    results["fifo_missing"] = order["missing"]
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "platform": platform.platform(),
        "loadavg_at_end": os.getloadavg(),
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 messages per topic, 2 rounds")
    parser.add_argument("--count", type=int, default=0, help="messages per topic (default 100,000)")
    parser.add_argument("--groups", type=int, default=1000, help="FIFO message groups")
    parser.add_argument("--rounds", type=int, default=0, help="consume rounds (default 3, quick 2)")
    parser.add_argument("--workers", type=int, default=4, help="concurrent ReceiveMessage loops")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    count = args.count or (20_000 if args.quick else 100_000)
    rounds = args.rounds or (2 if args.quick else 3)
    results = asyncio.run(run(count, args.groups, rounds, args.workers))
    results["mode"] = "quick" if args.quick else ("custom" if args.count else "full")
    text = json.dumps(results, indent=2)
    sys.stdout.write(text + "\n")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
