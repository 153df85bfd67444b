"""broker_bench's ``--single-only`` mode and ``produce_rounds``: the single-message produce rates of
the bare server and a real broker process, in alternating rounds."""

from __future__ import annotations

import statistics

import grpc
import pytest

from bench import broker_bench
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc


async def test_produce_rounds_alternate_the_two_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int, int, int]] = []

    async def produce(target: str, count: int, per_request: int, in_flight: int) -> float:
        calls.append((target, count, per_request, in_flight))
        return float(len(calls))

    monkeypatch.setattr(broker_bench, "produce", produce)
    monkeypatch.setattr(broker_bench, "ROUNDS", 3)
    results = await broker_bench.produce_rounds(broker_bench.SINGLE, "bare", "ours", 50)
    # bare, ours; ours, bare; bare, ours: a slower stretch of the machine falls on both sides
    assert [c[0] for c in calls] == ["bare", "ours", "ours", "bare", "bare", "ours"]
    assert {c[1:] for c in calls} == {(50, 1, 16)}  # one message per request, 16 in flight
    assert results["grpc_ceiling_single_msgs_per_s_rounds"] == [1, 4, 5]
    assert results["produce_single_msgs_per_s_rounds"] == [2, 3, 6]
    assert results["grpc_ceiling_single_msgs_per_s"] == 4 and results["produce_single_msgs_per_s"] == 3


async def test_single_only_measures_every_round_of_both_servers() -> None:
    results = await broker_bench.run_single_only(count=300)
    for figure in ("produce_single_msgs_per_s", "grpc_ceiling_single_msgs_per_s"):
        rounds = results[f"{figure}_rounds"]
        assert len(rounds) == broker_bench.ROUNDS and min(rounds) > 0
        assert results[figure] == pytest.approx(statistics.median(rounds), abs=1)
    assert results["single_vs_bare_single"] == pytest.approx(
        results["produce_single_msgs_per_s"] / results["grpc_ceiling_single_msgs_per_s"]
    )
    # each server's CPU and the client's per message, every round: a process that did the work
    for stem in ("produce_single", "grpc_ceiling_single"):
        for side in ("server", "client"):
            rounds = results[f"{stem}_{side}_cpu_us_per_msg_rounds"]
            assert len(rounds) == broker_bench.ROUNDS and min(rounds) > 0, (stem, side, rounds)


async def test_the_bench_sends_carry_an_official_clients_headers() -> None:
    """Every SendMessage of the bench carries the headers an official client sends, a new request
    id each call: the servers decode them for every call, as they do for real clients."""
    seen: list[dict[str, str]] = []

    async def send(
        request: svc.SendMessageRequest, context: grpc.aio.ServicerContext
    ) -> svc.SendMessageResponse:
        seen.append(dict(context.invocation_metadata()))
        return svc.SendMessageResponse(status=pb.Status(code=pb.Code.OK))

    handler = grpc.method_handlers_generic_handler(
        "apache.rocketmq.v2.MessagingService",
        {
            "SendMessage": grpc.unary_unary_rpc_method_handler(
                send,
                request_deserializer=svc.SendMessageRequest.FromString,
                response_serializer=svc.SendMessageResponse.SerializeToString,
            )
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        await broker_bench.produce(f"127.0.0.1:{port}", 4, 1, 2)
    finally:
        await server.stop(None)
    assert len(seen) == 4
    for headers in seen:
        assert headers["x-mq-protocol"] == "v2" and headers["x-mq-language"] == "PYTHON"
        assert headers["x-mq-client-id"] == broker_bench.BENCH_CLIENT_ID
        assert headers["x-mq-date-time"].endswith("Z") and "x-mq-client-version" in headers
    assert len({h["x-mq-request-id"] for h in seen}) == 4
