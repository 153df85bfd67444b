"""The lag job on real Spark: percentiles, minutes above SLO, stuck queues, trend, vs a reference."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from analytics import jobs, reference
from analytics.synthetic import lag_record, write_control_exports, write_records
from tests.integration.analytics.conftest import PRICES

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DAY = "2025-03-10"
START = datetime.fromisoformat(f"{DAY}T10:00:00+00:00")
GROUPS = [
    {"tenant": "acme", "group": "g-both", "lag_slo_messages": 100, "lag_slo_seconds": 20},
    {"tenant": "acme", "group": "g-time", "lag_slo_messages": None, "lag_slo_seconds": 20},
    {"tenant": "acme", "group": "g-none", "lag_slo_messages": None, "lag_slo_seconds": None},
]


def _q0(m: int) -> tuple[int, int]:
    """Queue 0: lag 5 while acked for 30 minutes, then nothing acked and 10 more messages a minute."""
    committed = 100 + m if m < 30 else 130
    lag = 5 if m < 30 else 5 + 10 * (m - 29)
    return committed, lag


def _samples(group: str) -> list[dict[str, Any]]:
    records = []
    for m in range(60):
        for second, noise in ((0, 1000), (30, 0)):  # the minute's last sample (:30) is the one kept
            ts = START + timedelta(minutes=m, seconds=second)
            committed, lag = _q0(m)
            records.append(
                lag_record("b1", "acme", group, "orders", 0, ts, committed, committed + lag + noise,
                           (lag + noise) * 100, ts)
            )  # fmt: skip
            records.append(
                lag_record("b1", "acme", group, "orders", 1, ts, 1000 + m, 1000 + m + m % 3, 0, ts)
            )
    return records


def _rows(spark: Any, out: Path, day: str) -> dict[str, dict[str, Any]]:
    return {
        r["group"]: r.asDict() for r in spark.read.parquet(str(out / "lag_daily" / f"date={day}")).collect()
    }


def test_lag_report_matches_hand_computation(spark: Any, roots: tuple[Path, Path]) -> None:
    # given three groups with the same samples and different SLOs, and two earlier report days
    root, out = roots
    write_control_exports(root, DAY, PRICES, GROUPS)
    write_records(root, "lag", [r for g in ("g-both", "g-time", "g-none") for r in _samples(g)])
    earlier = spark.createDataFrame(
        [("acme", "g-both", 100, 1000), ("acme", "g-both", 200, 3000)], "tenant string, group string, "
        "p95_lag_messages long, p95_lag_ms long",
    )  # fmt: skip
    for i, day in enumerate(("2025-03-04", "2025-03-09")):
        earlier.limit(2).filter(earlier.p95_lag_messages == (100, 200)[i]).write.parquet(
            str(out / "lag_daily" / f"date={day}")
        )
    # when
    jobs.run_job(spark, "lag", DAY, str(root), str(out), stuck_after=10)
    rows = _rows(spark, out, DAY)
    # then: minute lag = queue 0 + queue 1; 60 minutes: 30 at 5..7, then 15 .. 307 rising
    both = rows["g-both"]
    assert both["minutes_sampled"] == 60
    assert (both["p50_lag_messages"], both["p95_lag_messages"], both["max_lag_messages"]) == (7, 277, 307)
    assert (both["p50_lag_ms"], both["p95_lag_ms"], both["max_lag_ms"]) == (500, 27500, 30500)
    # above 100 messages from minute 39 (105) on, or above 20 s from minute 49 on: 21 minutes
    assert both["minutes_above_slo"] == 21
    assert rows["g-time"]["minutes_above_slo"] == 11
    assert rows["g-none"]["minutes_above_slo"] is None
    # queue 0 acks nothing from minute 30 while its lag grows: stuck from minute 40 to 59
    assert (both["stuck_minutes"], both["stuck_queues"]) == (20, 1)
    # the week before: mean p95 of 150 messages and 2000 ms
    assert both["prev_week_p95_lag_messages"] == 150.0
    assert both["trend_lag_messages_pct"] == pytest.approx((277 - 150) / 150 * 100)
    assert both["trend_lag_ms_pct"] == pytest.approx((27500 - 2000) / 2000 * 100)
    assert rows["g-time"]["trend_lag_messages_pct"] is None


def test_generated_lag_matches_independent_computation(spark: Any, roots: tuple[Path, Path]) -> None:
    # given random walks for a few groups, crossing midnight (the day before's last hour gives context)
    root, out = roots
    rng = random.Random(3)
    groups = [
        {"tenant": f"t{i % 2}", "group": f"g{i}", "lag_slo_messages": rng.choice((None, 50)),
         "lag_slo_seconds": rng.choice((None, 5))}
        for i in range(4)
    ]  # fmt: skip
    write_control_exports(root, DAY, PRICES, groups)
    records = []
    start = datetime.fromisoformat(f"{DAY}T00:00:00+00:00") - timedelta(minutes=40)
    for g in groups:
        for queue in range(2):
            committed, produced = 0, 0
            for step in range(2 * 150):
                ts = start + timedelta(seconds=30 * step)
                produced += rng.randint(0, 4)
                if rng.random() < 0.6 and (step // 40) % 2 == 0:
                    committed = min(produced, committed + rng.randint(0, 6))
                records.append(lag_record("b1", g["tenant"], g["group"], "t", queue, ts, committed, produced,
                                          (produced - committed) * 250, ts))  # fmt: skip
    records += records[::9]  # replays
    write_records(root, "lag", records)
    # when
    jobs.run_job(spark, "lag", DAY, str(root), str(out), stuck_after=5)
    # then
    previous = (datetime.fromisoformat(DAY) - timedelta(days=1)).date().isoformat()
    samples = reference.dedupe(
        [*reference.read_day(root, "lag", DAY), *reference.read_day(root, "lag", previous, hours=["23"])]
    )
    slos = {(g["tenant"], g["group"]): (g["lag_slo_messages"], g["lag_slo_seconds"]) for g in groups}
    expected = reference.lag_daily(samples, DAY, slos, stuck_after=5)
    got = {
        (r["tenant"], g): {k: r[k] for k in next(iter(expected.values()))}
        for g, r in _rows(spark, out, DAY).items()
    }
    assert got == expected
    assert any(v["stuck_minutes"] for v in expected.values())
