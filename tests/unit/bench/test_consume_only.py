"""broker_bench's ``--consume-only`` mode: the consume loops alone, against the bare server and a
real broker process, in alternating rounds."""

from __future__ import annotations

import statistics

import pytest

from bench import broker_bench


async def test_consume_only_measures_every_round_of_both_servers() -> None:
    results = await broker_bench.run_consume_only(count=600)
    for prefix in ("", "grpc_ceiling_"):
        for figure in ("consume_msgs_per_s", "consume_cpu_us_per_msg", "consume_client_cpu_us_per_msg"):
            rounds = results[f"{prefix}{figure}_rounds"]
            # every round of each side was measured and consumed something; the figure is their median
            assert len(rounds) == broker_bench.ROUNDS and min(rounds) > 0
            assert results[f"{prefix}{figure}"] == pytest.approx(statistics.median(rounds), abs=0.01)
    assert results["consume_vs_grpc_ceiling"] == pytest.approx(
        results["consume_msgs_per_s"] / results["grpc_ceiling_consume_msgs_per_s"]
    )
