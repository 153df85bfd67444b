"""Delivery-semantics benchmarks against a real broker process. Timers: accept rate of N pending
delay messages, delivery lateness (p50/p99/max) and the broker's RSS growth (/proc/PID/status).

Two latenesses per message: ``reput_lateness`` = store timestamp of the re-put message - due time
(the broker's scanner alone) and ``lateness`` = receipt at the bench - due time (scanner + receive
path + the bench's own consumer: 8 receivers, batch 64, one AckMessage per received batch).

    uv run python -m bench.semantics_bench [--quick] [--count N] [--spread-s S] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

import grpc

from bench.broker_bench import our_broker, stub
from mqcloud.admin.v1 import admin_pb2, admin_pb2_grpc
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

TOPIC, GROUP = "timers", "timers-g"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def broker_pid(port: int) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"broker" in cmd and f"127.0.0.1:{port}".encode() in cmd:
                return int(entry.name)
    raise RuntimeError("broker process not found")


def delay_message(i: int, deliver_ms: int) -> pb.Message:
    sp = pb.SystemProperties(
        message_id=f"{os.getpid():08X}{i:024X}", message_type=pb.DELAY, born_host="bench"
    )
    sp.delivery_timestamp.FromMilliseconds(deliver_ms)
    return pb.Message(topic=pb.Resource(name=TOPIC), body=str(deliver_ms).encode(), system_properties=sp)


async def timers(
    target: str, count: int, spread_s: float, per_request: int = 256, in_flight: int = 8, receivers: int = 8
) -> dict[str, float]:
    pid = broker_pid(int(target.rsplit(":", 1)[1]))
    rss0 = rss_kib(pid)
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

        async def sender() -> None:
            while not queue.empty():
                resp = await s.SendMessage(queue.get_nowait(), timeout=60)
                if resp.status.code != pb.Code.OK:
                    raise RuntimeError(f"send failed: {resp.status}")

        t0 = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(in_flight)))
        accept_rate = count / (time.perf_counter() - t0)
        rss_pending = rss_kib(pid)
        sent_done_ms = time.time() * 1000
        lateness: list[float] = []  # receipt time - due time, at the bench
        reput_lateness: list[float] = []  # store time of the re-put message - due time, at the broker
        early = 0
        deadline = time.monotonic() + spread_s + 120
        acks: set[asyncio.Task[object]] = set()

        async def receiver() -> None:
            nonlocal early
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
                        reput_lateness.append(sp.store_timestamp.ToMilliseconds() - due)
                        early += now < due or sp.store_timestamp.ToMilliseconds() < due
                        entries.append(
                            svc.AckMessageEntry(message_id=sp.message_id, receipt_handle=sp.receipt_handle)
                        )
                if entries:  # one AckMessage per received batch, not awaited before the next receive
                    topic = req.message_queue.topic
                    ack = svc.AckMessageRequest(group=req.group, topic=topic, entries=entries)
                    task = asyncio.ensure_future(s.AckMessage(ack, timeout=60))
                    acks.add(task)
                    task.add_done_callback(acks.discard)

        await asyncio.gather(*(receiver() for _ in range(receivers)))
        for resp in await asyncio.gather(*acks):
            if resp.status.code not in (pb.Code.OK, pb.Code.MULTIPLE_RESULTS):
                raise RuntimeError(f"ack failed: {resp.status}")
    lateness.sort()
    reput_lateness.sort()
    n = len(lateness)
    return {
        "count": count,
        "accept_rate_msgs_s": round(accept_rate),
        "sends_done_before_first_due_ms": round(start_at - sent_done_ms),
        "delivered": n,
        "early": early,
        "lateness_p50_ms": round(lateness[n // 2]) if n else -1,
        "lateness_p99_ms": round(lateness[int(n * 0.99) - 1]) if n else -1,
        "lateness_max_ms": round(lateness[-1]) if n else -1,
        "reput_lateness_p50_ms": round(reput_lateness[n // 2]) if n else -1,
        "reput_lateness_p99_ms": round(reput_lateness[int(n * 0.99) - 1]) if n else -1,
        "reput_lateness_max_ms": round(reput_lateness[-1]) if n else -1,
        "rss_growth_pending_mib": round((rss_pending - rss0) / 1024, 1),
        "rss_growth_end_mib": round((rss_kib(pid) - rss0) / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100k timers instead of 1M")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--spread-s", type=float, default=20.0)
    parser.add_argument("--per-request", type=int, default=256, help="messages per SendMessage")
    parser.add_argument("--in-flight", type=int, default=8, help="SendMessage requests at a time")
    parser.add_argument("--receivers", type=int, default=8, help="concurrent ReceiveMessage loops")
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    args = parser.parse_args()
    count = args.count or (100_000 if args.quick else 1_000_000)
    with our_broker("async") as target:
        with grpc.insecure_channel(target) as channel:
            admin = admin_pb2_grpc.BrokerAdminStub(channel)
            admin.CreateTopic(
                admin_pb2.CreateTopicRequest(
                    topic=admin_pb2.Topic(name=TOPIC, queue_count=1, message_type=admin_pb2.DELAY)
                )
            )
            admin.CreateGroup(admin_pb2.CreateGroupRequest(group=admin_pb2.Group(name=GROUP)))
        result = asyncio.run(
            timers(target, count, args.spread_s, args.per_request, args.in_flight, args.receivers)
        )
    result["mode"] = "quick" if args.quick else ("custom" if args.count else "full")
    out = json.dumps({"timers": result}, indent=2)
    print(out)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(out + "\n")


if __name__ == "__main__":
    main()
