"""Delivery-semantics benchmarks against a real broker process. Timers: accept rate of N pending
delay messages, how late each one was delivered, and the broker's memory growth.

*Delivered* is the re-put of the timer message into its real topic (from then on consumers can
receive it): its lateness is the re-put record's store timestamp minus its due time (the due time
is the message body). After the run the broker is stopped and its CommitLog is read back, so the
lateness of every message is counted (``late`` = more than 1 s after its due time, ``early`` =
before it), whatever the consumers managed.

With ``--receivers N`` (N > 0) the bench also consumes through ReceiveMessage while the timers fall
due (8 receivers, batch 64, one AckMessage per received batch) and reports ``receipt_lateness``:
receipt at the bench minus due time (the scanner + the broker's consume path + the bench's consumer).

Memory: ``rss_growth`` is VmRSS growth, which counts the CommitLog's mapped file pages (page cache,
reclaimable); ``anon_growth`` is RssAnon growth, the broker's own heap, the figure the 200 MiB
target is about. ``anon_peak_growth`` is the highest RssAnon sampled (every 0.5 s) during the run.

    uv run python -m bench.semantics_bench [--quick] [--count N] [--spread-s S] [--receivers N] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from bench.broker_bench import free_port, process, stub
from mqcloud.admin.v1 import admin_pb2, admin_pb2_grpc
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

TOPIC, GROUP = "timers", "timers-g"
LATE_MS = 1000  # the target: every timer delivered within 1 s of its due time


def proc_kib(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` figure in KiB (``VmRSS``, ``RssAnon``); 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


@contextlib.contextmanager
def timer_broker(data_dir: Path, flush: str = "async") -> Iterator[tuple[str, int]]:
    """A broker process (``flush`` async or sync, dev mode) on ``data_dir``: (target, pid); stopped on exit
    (SIGTERM, a clean shutdown), leaving its store to be read."""
    port = free_port()
    argv = [sys.executable, "-m", "cli.main", "broker", "start", "--data-dir", str(data_dir)]
    argv += ["--listen", f"127.0.0.1:{port}", "--metrics-listen", "0", "--flush", flush, "--dev"]
    with process(argv, port) as proc:
        yield f"127.0.0.1:{port}", proc.pid


def delay_message(i: int, deliver_ms: int) -> pb.Message:
    sp = pb.SystemProperties(
        message_id=f"{os.getpid():08X}{i:024X}", message_type=pb.DELAY, born_host="bench"
    )
    sp.delivery_timestamp.FromMilliseconds(deliver_ms)
    return pb.Message(topic=pb.Resource(name=TOPIC), body=str(deliver_ms).encode(), system_properties=sp)


def percentiles(values: list[float], prefix: str) -> dict[str, float]:
    values.sort()
    n = len(values)
    return {
        f"{prefix}_p50_ms": round(values[n // 2]) if n else -1,
        f"{prefix}_p99_ms": round(values[max(0, int(n * 0.99) - 1)]) if n else -1,
        f"{prefix}_max_ms": round(values[-1]) if n else -1,
    }


def stored_lateness(data_dir: Path) -> list[int]:
    """Store timestamp - due time of every message re-put into the topic (the broker is stopped)."""
    from dataplane.config import BrokerSettings
    from dataplane.store import MessageStore, MessageStoreConfig

    segment = BrokerSettings.model_fields["commit_log_segment_bytes"].default
    out: list[int] = []
    config = MessageStoreConfig(store_dir=data_dir / "store", mapped_file_size_commit_log=segment)
    with MessageStore(config) as store:
        offset = 0
        while True:
            result = store.get_messages(TOPIC, 0, offset, max_count=4096, max_bytes=64 << 20)
            if not result.messages:
                break
            out.extend(m.store_timestamp - int(m.body) for m in result.messages)
            offset = result.next_begin_offset
    return out


async def timers(
    target: str,
    pid: int,
    count: int,
    spread_s: float,
    per_request: int = 256,
    in_flight: int = 8,
    receivers: int = 0,
) -> dict[str, float]:
    rss0, anon0 = proc_kib(pid, "VmRSS"), proc_kib(pid, "RssAnon")
    anon_peak = anon0
    start_at = int(time.time() * 1000) + 5000 + int(count / 20)  # after the sends finish
    async with stub(target) as s:
        requests = [
            svc.SendMessageRequest(
                messages=[
                    delay_message(i, start_at + int((i * spread_s * 1000) / count))
                    for i in range(j, min(j + per_request, count))
                ]
            )
            for j in range(0, count, per_request)
        ]
        queue: asyncio.Queue[svc.SendMessageRequest] = asyncio.Queue()
        for r in requests:
            queue.put_nowait(r)
        del requests

        async def sender() -> None:
            while not queue.empty():
                resp = await s.SendMessage(queue.get_nowait(), timeout=60)
                if resp.status.code != pb.Code.OK:
                    raise RuntimeError(f"send failed: {resp.status}")

        async def sample() -> None:
            nonlocal anon_peak
            while True:
                anon_peak = max(anon_peak, proc_kib(pid, "RssAnon"))
                await asyncio.sleep(0.5)

        sampler = asyncio.ensure_future(sample())
        t0 = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(in_flight)))
        accept_rate = count / (time.perf_counter() - t0)
        rss_pending, anon_pending = proc_kib(pid, "VmRSS"), proc_kib(pid, "RssAnon")
        sent_done_ms = time.time() * 1000
        lateness: list[float] = []  # receipt time - due time, at the bench
        received_early = 0
        deadline = time.monotonic() + (start_at - sent_done_ms) / 1000 + spread_s + 120
        acks: set[asyncio.Task[object]] = set()

        async def receiver() -> None:
            nonlocal received_early
            req = svc.ReceiveMessageRequest(
                group=pb.Resource(name=GROUP),
                message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=0),
                filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
                batch_size=64,
            )
            req.invisible_duration.FromSeconds(300)
            req.long_polling_timeout.FromSeconds(2)
            while len(lateness) < count and time.monotonic() < deadline:
                entries = []
                async for r in s.ReceiveMessage(req, timeout=10):
                    if r.WhichOneof("content") == "message":
                        now = time.time() * 1000  # at receipt, before anything else is awaited
                        sp = r.message.system_properties
                        due = int(r.message.body)
                        lateness.append(now - due)
                        received_early += now < due
                        entries.append(
                            svc.AckMessageEntry(message_id=sp.message_id, receipt_handle=sp.receipt_handle)
                        )
                if entries:  # one AckMessage per received batch, not awaited before the next receive
                    topic = req.message_queue.topic
                    ack = svc.AckMessageRequest(group=req.group, topic=topic, entries=entries)
                    task = asyncio.ensure_future(s.AckMessage(ack, timeout=60))
                    acks.add(task)
                    task.add_done_callback(acks.discard)

        async def delivered() -> int:
            async with grpc.aio.insecure_channel(target) as channel:
                admin = admin_pb2_grpc.BrokerAdminStub(channel)
                stats = await admin.GetTopicStats(admin_pb2.GetTopicStatsRequest(name=TOPIC))
                return sum(q.max_offset for q in stats.queues)

        if receivers:
            await asyncio.gather(*(receiver() for _ in range(receivers)))
            for resp in await asyncio.gather(*acks):
                if resp.status.code not in (pb.Code.OK, pb.Code.MULTIPLE_RESULTS):
                    raise RuntimeError(f"ack failed: {resp.status}")
        while time.monotonic() < deadline:  # polling another process: no event to wait on
            if await delivered() >= count:
                break
            await asyncio.sleep(0.5)
        sampler.cancel()
    result: dict[str, float] = {
        "count": count,
        "spread_s": spread_s,
        "accept_rate_msgs_s": round(accept_rate),
        "sends_done_before_first_due_ms": round(start_at - sent_done_ms),
        "rss_growth_pending_mib": round((rss_pending - rss0) / 1024, 1),
        "rss_growth_end_mib": round((proc_kib(pid, "VmRSS") - rss0) / 1024, 1),
        "anon_growth_pending_mib": round((anon_pending - anon0) / 1024, 1),
        "anon_growth_end_mib": round((proc_kib(pid, "RssAnon") - anon0) / 1024, 1),
        "anon_peak_growth_mib": round((anon_peak - anon0) / 1024, 1),
        "anon_start_mib": round(anon0 / 1024, 1),  # growth can be negative: start-up garbage freed
        "anon_peak_mib": round(anon_peak / 1024, 1),
    }
    if receivers:
        result["received"] = len(lateness)
        result["received_early"] = received_early
        result |= percentiles(lateness, "receipt_lateness")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100k timers instead of 1M")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--spread-s", type=float, default=20.0, help="due times spread over this")
    parser.add_argument("--per-request", type=int, default=256, help="messages per SendMessage")
    parser.add_argument("--in-flight", type=int, default=8, help="SendMessage requests at a time")
    parser.add_argument("--receivers", type=int, default=0, help="also consume with N ReceiveMessage loops")
    parser.add_argument("--flush", choices=("async", "sync"), default="async", help="the broker's flush")
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    args = parser.parse_args()
    count = args.count or (100_000 if args.quick else 1_000_000)
    with tempfile.TemporaryDirectory(prefix="mqbench-timers-") as tmp:
        with timer_broker(Path(tmp), args.flush) as (target, pid):
            with grpc.insecure_channel(target) as channel:
                admin = admin_pb2_grpc.BrokerAdminStub(channel)
                admin.CreateTopic(
                    admin_pb2.CreateTopicRequest(
                        topic=admin_pb2.Topic(name=TOPIC, queue_count=1, message_type=admin_pb2.DELAY)
                    )
                )
                admin.CreateGroup(admin_pb2.CreateGroupRequest(group=admin_pb2.Group(name=GROUP)))
            result = asyncio.run(
                timers(target, pid, count, args.spread_s, args.per_request, args.in_flight, args.receivers)
            )
        lateness = stored_lateness(Path(tmp))
    result["delivered"] = len(lateness)
    result["late"] = sum(x > LATE_MS for x in lateness)
    result["early"] = sum(x < 0 for x in lateness)
    result |= percentiles(lateness, "lateness")
    result["mode"] = "quick" if args.quick else ("custom" if args.count else "full")
    result["flush"] = args.flush
    out = json.dumps({"timers": result}, indent=2)
    print(out)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(out + "\n")


if __name__ == "__main__":
    main()
