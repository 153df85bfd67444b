"""broker_bench's ``--consume-only`` mode: the consume loops alone, against the bare server and a
real broker process, in alternating rounds."""

from __future__ import annotations

import pytest

from bench import broker_bench


async def test_consume_only_measures_both_servers() -> None:
    results = await broker_bench.run_consume_only(count=600)
    for prefix in ("", "grpc_ceiling_"):
        # every round consumed (a round that found nothing would fail its loop or give 0)
        assert results[f"{prefix}consume_msgs_per_s"] > 0
        assert results[f"{prefix}consume_cpu_us_per_msg"] > 0
        assert results[f"{prefix}consume_client_cpu_us_per_msg"] > 0
    assert results["consume_vs_grpc_ceiling"] == pytest.approx(
        results["consume_msgs_per_s"] / results["grpc_ceiling_consume_msgs_per_s"]
    )
