"""broker_bench's ``--push-only`` mode: the SDK's push consumer against the consume loop on a real
broker process, in alternating rounds."""

from __future__ import annotations

import statistics

import pytest

from bench import broker_bench


async def test_push_only_measures_every_round_of_both_consumers() -> None:
    results = await broker_bench.run_push_only(count=600)
    figures = (
        "push_consume_msgs_per_s",
        "push_consume_client_cpu_us_per_msg",
        "consume_msgs_per_s",
        "consume_client_cpu_us_per_msg",
    )
    for figure in figures:
        rounds = results[f"{figure}_rounds"]
        # every round of each side was measured and consumed something; the figure is their median
        assert len(rounds) == broker_bench.ROUNDS and min(rounds) > 0
        assert results[figure] == pytest.approx(statistics.median(rounds), abs=0.01)
    assert results["push_vs_consume"] == pytest.approx(
        results["push_consume_msgs_per_s"] / results["consume_msgs_per_s"]
    )
