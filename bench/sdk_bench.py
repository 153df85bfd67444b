"""The blocking SDK's calls: on the caller's thread, through the client's loop, and a bare stub.

The blocking clients (``Producer``, ``SimpleConsumer``) make their sends, receives and acks on the
caller's thread with gRPC's blocking API (``mqcloud._blocking_rpc``); before, every call was handed
to the client's private asyncio loop and made there with grpc.aio. This harness measures the three
ways side by side against one broker (its own process, ASYNC_FLUSH), one call at a time from one
thread, 1 KiB messages, in alternating rounds (medians of ``ROUNDS``):

- ``blocking_send_calls_per_s`` / ``_cpu_us_per_call``   ``Producer.send`` (this process's CPU per
                                 call, every thread of it: the client's whole cost)
- ``loop_send_calls_per_s`` / ``_cpu_us_per_call``       the same producer's ``send_async(m).result()``:
                                 the call made on the loop, as every blocking send was before
- ``stub_send_calls_per_s`` / ``_cpu_us_per_call``       a SendMessage request built once, sent on a
                                 bare blocking stub: what gRPC alone costs this client per call
- ``blocking_consume_msgs_per_s`` / ``loop_consume_msgs_per_s``   ``SimpleConsumer.receive`` of 32,
                                 then ``ack`` of each message, on this thread or through the loop
- ``ack_all_consume_msgs_per_s``  the same receive, then one ``ack_all`` of the 32 (one AckMessage)
- ``ratios``: ``blocking_vs_loop_send`` and ``blocking_vs_loop_consume`` (rates), ``blocking_send_vs_stub``
                                 (rate over the bare stub's), ``ack_all_vs_ack_consume`` (ack_all's
                                 consume rate over one ack per message's)

    uv run python -m bench.sdk_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.broker_bench import BODY, GROUP, TOPIC, message, our_broker  # noqa: E402
from mqcloud import ClientConfig, Message, Producer, SimpleConsumer  # noqa: E402
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb  # noqa: E402
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc  # noqa: E402
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc as svc_grpc  # noqa: E402

ROUNDS = 3
BATCH = 32


def _timed(calls: int, one: Callable[[], int]) -> tuple[float, float]:
    """Run ``one`` until it reports ``calls`` units; (units per second, this process's CPU us per unit)."""
    cpu, started = time.process_time(), time.perf_counter()
    done = 0
    while done < calls:
        got = one()
        if got == 0:
            raise RuntimeError(f"nothing more after {done} of {calls}")
        done += got
    return done / (time.perf_counter() - started), (time.process_time() - cpu) / done * 1e6


def _sends(target: str, calls: int) -> dict[str, list[tuple[float, float]]]:
    config = ClientConfig(target)
    out: dict[str, list[tuple[float, float]]] = {"blocking": [], "loop": [], "stub": []}
    with Producer(config, [TOPIC]) as producer, grpc.insecure_channel(target) as channel:
        stub = svc_grpc.MessagingServiceStub(channel)
        request = svc.SendMessageRequest(messages=[message(0)])

        def blocking() -> int:
            producer.send(Message(TOPIC, BODY))
            return 1

        def loop() -> int:
            producer.send_async(Message(TOPIC, BODY)).result(30)
            return 1

        def bare() -> int:
            if stub.SendMessage(request, timeout=30).status.code != pb.Code.OK:
                raise RuntimeError("the bare stub's send was refused")
            return 1

        ways = [("blocking", blocking), ("loop", loop), ("stub", bare)]
        for _way, one in ways:  # warm-up: channels, routes, the broker's first appends
            _timed(calls // 10, one)
        for round_ in range(ROUNDS):
            for way, one in ways if round_ % 2 == 0 else ways[::-1]:
                out[way].append(_timed(calls, one))
    return out


def _consumes(target: str, count: int) -> dict[str, list[tuple[float, float]]]:
    """Receive-and-ack through the blocking consumer, each way in turn (the messages were sent)."""
    out: dict[str, list[tuple[float, float]]] = {"blocking": [], "loop": [], "ack_all": []}
    with SimpleConsumer(ClientConfig(target), GROUP, {TOPIC: "*"}, await_duration=2) as consumer:
        core, lt = consumer.core, consumer._lt()

        def blocking() -> int:
            got = consumer.receive(BATCH, 60)
            for m in got:
                consumer.ack(m)
            return len(got)

        def loop() -> int:
            got = lt.run(core.receive(BATCH, 60))
            for m in got:
                lt.run(core.ack(m))
            return len(got)

        def ack_all() -> int:
            got = consumer.receive(BATCH, 60)
            refused = [e for e in consumer.ack_all(got) if e is not None]
            if refused:
                raise RuntimeError(f"ack_all refused {len(refused)} of {len(got)}: {refused[0]}")
            return len(got)

        ways = [("blocking", blocking), ("loop", loop), ("ack_all", ack_all)]
        for round_ in range(ROUNDS):
            for way, one in ways if round_ % 2 == 0 else ways[::-1]:
                out[way].append(_timed(count, one))
    return out


def run(quick: bool) -> dict[str, Any]:
    calls = 1_000 if quick else 5_000
    consumed = 1_000 if quick else 5_000
    results: dict[str, Any] = {}
    with our_broker("async") as (target, _):
        sends = _sends(target, calls)
        # what the consume rounds take: 3 ways x ROUNDS, plus what the sends' rounds left stored
        stored = (calls // 10 + calls * ROUNDS) * 3
        if stored < 3 * ROUNDS * consumed:
            raise RuntimeError("the send rounds stored too few messages for the consume rounds")
        consumes = _consumes(target, consumed)
    for way, samples in sends.items():
        results[f"{way}_send_calls_per_s"] = statistics.median(r for r, _ in samples)
        results[f"{way}_send_cpu_us_per_call"] = statistics.median(c for _, c in samples)
        results[f"{way}_send_calls_per_s_rounds"] = [round(r) for r, _ in samples]
    for way, samples in consumes.items():
        results[f"{way}_consume_msgs_per_s"] = statistics.median(r for r, _ in samples)
        results[f"{way}_consume_cpu_us_per_msg"] = statistics.median(c for _, c in samples)
        results[f"{way}_consume_msgs_per_s_rounds"] = [round(r) for r, _ in samples]

    def ratio(a: str, b: str) -> float:
        return round(results[a] / results[b], 2)

    results["ratios"] = {
        "blocking_vs_loop_send": ratio("blocking_send_calls_per_s", "loop_send_calls_per_s"),
        "blocking_send_vs_stub": ratio("blocking_send_calls_per_s", "stub_send_calls_per_s"),
        "blocking_vs_loop_consume": ratio("blocking_consume_msgs_per_s", "loop_consume_msgs_per_s"),
        "ack_all_vs_ack_consume": ratio("ack_all_consume_msgs_per_s", "blocking_consume_msgs_per_s"),
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (about 30 s)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    results = run(args.quick)
    text = json.dumps(results, indent=2)
    sys.stdout.write(text + "\n")
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
