"""broker_bench's consume rounds: the servers' consume loops and NATS JetStream in a rotating order,
medians of every side, and a missing NATS reported without losing our figures. The measuring
functions are replaced here (this tests the rounds alone; test_consume_only runs the real loops)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import broker_bench

SERVERS = [("grpc_ceiling_", "127.0.0.1:1", 11), ("", "127.0.0.1:2", 22)]


def _fake_sides(monkeypatch: pytest.MonkeyPatch, nats_fails: bool = False) -> list[str]:
    order: list[str] = []

    async def consume_figures(target: str, pid: int, count: int, prefix: str) -> dict[str, float]:
        order.append(prefix or "ours")
        n = order.count(prefix or "ours")
        return {f"{prefix}consume_msgs_per_s": 1000.0 * n + pid, f"{prefix}consume_steal_share": 0.01 * n}

    async def nats_figures(count: int) -> dict[str, float]:
        order.append("nats")
        if nats_fails:
            raise ConnectionRefusedError("nats://127.0.0.1:4222")
        n = order.count("nats")
        return {"nats_publish_msgs_per_s": 500.0 * n, "nats_consume_msgs_per_s": 400.0 * n + count}

    monkeypatch.setattr(broker_bench, "consume_figures", consume_figures)
    monkeypatch.setattr(broker_bench, "nats_figures", nats_figures)
    return order


async def test_every_side_takes_each_place_in_turn_and_the_figures_are_medians(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order = _fake_sides(monkeypatch)
    monkeypatch.setattr(broker_bench, "ROUNDS", 3)
    results: dict[str, Any] = await broker_bench.consume_rounds(SERVERS, count=900, nats_count=7)
    # a rotating order: no side always runs first (right after the produce phases) or last
    assert order == [
        "grpc_ceiling_",
        "ours",
        "nats",
        "ours",
        "nats",
        "grpc_ceiling_",
        "nats",
        "grpc_ceiling_",
        "ours",
    ]
    assert results["consume_msgs_per_s_rounds"] == [1022.0, 2022.0, 3022.0]
    assert results["consume_msgs_per_s"] == 2022.0 and results["grpc_ceiling_consume_msgs_per_s"] == 2011.0
    assert results["nats_consume_msgs_per_s"] == 807.0 and results["nats_publish_msgs_per_s_rounds"] == [
        500,
        1000,
        1500,
    ]
    assert results["consume_steal_share_rounds"] == [0.01, 0.02, 0.03]
    assert "nats_error" not in results


async def test_a_missing_nats_is_reported_once_and_our_rounds_still_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order = _fake_sides(monkeypatch, nats_fails=True)
    monkeypatch.setattr(broker_bench, "ROUNDS", 3)
    results = await broker_bench.consume_rounds(SERVERS, count=900, nats_count=7)
    assert order.count("nats") == 1 and order.count("ours") == 3 and order.count("grpc_ceiling_") == 3
    assert "ConnectionRefusedError" in results["nats_error"]
    assert "nats_consume_msgs_per_s" not in results and results["consume_msgs_per_s"] == 2022.0
