"""Delivery-semantics benchmarks against a real broker process. Timers: accept rate of N pending
delay messages, delivery lateness (p50/p99/max) and the broker's RSS growth (/proc/PID/status).

    uv run python bench/semantics_bench.py [--quick] [--count N] [--spread-s S]
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


async def timers(target: str, count: int, spread_s: float) -> dict[str, float]:
    pid = broker_pid(int(target.rsplit(":", 1)[1]))
    rss0 = rss_kib(pid)
    per_request, in_flight = 256, 8
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
        lateness: list[float] = []
        early = 0
        deadline = time.monotonic() + spread_s + 120

        async def receiver() -> None:
            nonlocal early
            while len(lateness) < count and time.monotonic() < deadline:
                req = svc.ReceiveMessageRequest(
                    group=pb.Resource(name=GROUP),
                    message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=0),
                    filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
                    batch_size=64,
                )
                req.invisible_duration.FromSeconds(300)
                req.long_polling_timeout.FromSeconds(2)
                acks = []
                async for r in s.ReceiveMessage(req, timeout=10):
                    if r.WhichOneof("content") == "message":
                        now = time.time() * 1000
                        due = int(r.message.body)
                        lateness.append(now - due)
                        early += now < due
                        acks.append(
                            svc.AckMessageEntry(
                                message_id=r.message.system_properties.message_id,
                                receipt_handle=r.message.system_properties.receipt_handle,
                            )
                        )
                for a in acks:
                    await s.AckMessage(
                        svc.AckMessageRequest(group=req.group, topic=req.message_queue.topic, entries=[a])
                    )

        await asyncio.gather(*(receiver() for _ in range(4)))
    lateness.sort()
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
        "rss_growth_pending_mib": round((rss_pending - rss0) / 1024, 1),
        "rss_growth_end_mib": round((rss_kib(pid) - rss0) / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100k timers instead of 1M")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--spread-s", type=float, default=20.0)
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
        result = asyncio.run(timers(target, count, args.spread_s))
    result["mode"] = "quick" if args.quick else ("custom" if args.count else "full")
    print(json.dumps({"timers": result}, indent=2))


if __name__ == "__main__":
    main()
