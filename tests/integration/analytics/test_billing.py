"""The billing job on real Spark (local mode): hand-computed figures, dedup, re-runs, late data."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from analytics import jobs, reference
from analytics.synthetic import (
    storage_record,
    synthetic_usage,
    usage_record,
    write_control_exports,
    write_records,
)
from tests.integration.analytics.conftest import PRICES

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DAY = "2025-03-10"
GIB = 1024**3


def _t(hhmm: str, day: str = DAY) -> datetime:
    return datetime.fromisoformat(f"{day}T{hhmm}:00+00:00")


def _rows(spark: Any, out: Path, table: str, partition: str) -> list[dict[str, Any]]:
    frame = spark.read.parquet(str(out / table / partition))
    return sorted((r.asDict() for r in frame.collect()), key=lambda r: tuple(str(v) for v in r.values()))


def _hand_dataset(root: Path) -> None:
    """acme (plan pro) and globex (unknown: default plan); every figure below is worked out by hand."""
    acme = [
        usage_record("b1", "acme", _t("00:00"), 10, 40960, 20, 81920, 10, 20, _t("00:01"),
                     {"SendMessage": 10}),
        # the broker replayed minute 00:00 after a restart: same id, written later, this copy wins
        usage_record("b1", "acme", _t("00:00"), 12, 49152, 20, 81920, 12, 20, _t("00:07"),
                     {"SendMessage": 12, "ReceiveMessage": 3}),
        usage_record("b2", "acme", _t("13:37"), 1000, GIB, 0, 0, 262144, 0, _t("13:38"),
                     {"SendMessage": 1000}),
        # another day: not billed on DAY
        usage_record("b1", "acme", _t("00:00", "2025-03-11"), 7, 7, 7, 7, 7, 7, _t("00:01", "2025-03-11")),
        storage_record("b1", "acme", "orders", _t("00:00"), 1 * GIB, _t("00:00")),
        storage_record("b1", "acme", "orders", _t("00:30"), 2 * GIB, _t("00:30")),  # last of hour 00
        storage_record("b1", "acme", "orders", _t("01:00"), 2 * GIB, _t("01:00")),
        storage_record("b2", "acme", "orders", _t("00:10"), 1 * GIB, _t("00:10")),
        storage_record("b1", "acme", "audit", _t("05:00"), GIB // 2, _t("05:00")),
        storage_record("b1", "acme", "audit", _t("05:00"), GIB // 2, _t("05:00")),  # duplicate id
    ]  # fmt: skip
    globex = [usage_record("b1", "globex", _t("23:59"), 3, 3000, 3, 3000, 3, 3, _t("23:59"))]
    write_records(root, "usage", acme[:1] + globex, seq=0)
    write_records(root, "usage", acme[1:], seq=1)


def test_billing_figures_match_hand_computation(spark: Any, roots: tuple[Path, Path]) -> None:
    # given
    root, out = roots
    _hand_dataset(root)
    # when
    result = jobs.run_job(spark, "billing", DAY, str(root), str(out))
    # then: usage per tenant-day, the replayed minute counted once (its later copy)
    usage = {r["tenant"]: r for r in _rows(spark, out, "usage_daily", f"date={DAY}")}
    assert usage["acme"] == {
        "tenant": "acme", "messages_in": 1012, "messages_out": 20, "requests_in_4k": 262156,
        "requests_out_4k": 20, "bytes_in": 49152 + GIB, "bytes_out": 81920, "api_calls": 1015,
        # (2 + 2) GiB on b1 (hours 00 and 01) + 1 GiB on b2 + 0.5 GiB audit
        "storage_byte_hours": 5 * GIB + GIB // 2, "storage_gb_hours": Decimal("5.500000"), "topic_days": 2,
    }  # fmt: skip
    assert usage["globex"]["requests_in_4k"] == 3 and usage["globex"]["topic_days"] == 0
    # lines: amount = quantity x price, in micro-units rounded half up
    lines = {(r["tenant"], r["item"]): r for r in _rows(spark, out, "invoice_lines", f"date={DAY}")}
    micros = {k: v["amount_micros"] for k, v in lines.items()}
    assert micros == {
        ("acme", "requests_in"): 104862,  # 262156 x 0.40 / 1e6 = 0.1048624
        ("acme", "requests_out"): 8,  # 20 x 0.40 / 1e6
        ("acme", "transfer_in"): 10000,  # 1.0000457... GB x 0.01
        ("acme", "transfer_out"): 7,  # 81920 / 2^30 x 0.09 = 0.00000686...
        ("acme", "storage"): 1733,  # 5.5 GB-hours x 0.23 / 730 = 0.0017328...
        ("acme", "topics"): 20000,  # 2 topic-days x 0.01
        ("globex", "requests_in"): 2,  # 3 x 0.50 / 1e6 = 1.5 micro-units, half up
        ("globex", "requests_out"): 2,
        ("globex", "transfer_in"): 0,  # price 0: a line with its quantity, amount 0
        ("globex", "transfer_out"): 0,  # 3000 / 2^30 x 0.10 = 0.00000028
    }
    assert lines[("acme", "transfer_in")]["quantity"] == Decimal("1.000046")
    assert lines[("acme", "storage")]["unit"] == "GB-hour"
    assert lines[("globex", "requests_in")]["plan"] == "standard"
    assert lines[("acme", "requests_in")]["amount"] == Decimal("0.104862")
    # the month's invoice: the plan fee plus the lines; initech (no usage) pays the fee only
    invoices = {r["tenant"]: r for r in _rows(spark, out, "invoices", "month=2025-03")}
    assert {t: (r["base_micros"], r["usage_micros"], r["total"]) for t, r in invoices.items()} == {
        "acme": (10_000_000, 136_610, Decimal("10.14")),
        "globex": (5_000_000, 4, Decimal("5.00")),
        "initech": (5_000_000, 0, Decimal("5.00")),
    }
    assert invoices["acme"]["days_billed"] == 1 and invoices["acme"]["final"] is False
    # 10 records in the day's files (the next day's in its own), 2 of them replays
    assert result.days[0].rows_in == 10 and result.days[0].rows_unique == 8


def _compare_with_reference(spark: Any, root: Path, out: Path, day: str) -> None:
    records = reference.dedupe(reference.read_day(root, "usage", day))
    expected_usage = reference.usage_daily(records, day)
    prices = {p["tenant"]: p for p in PRICES}
    usage = {r.pop("tenant"): r for r in _rows(spark, out, "usage_daily", f"date={day}")}
    assert usage == expected_usage
    expected_lines = reference.invoice_lines(expected_usage, prices)
    lines = [
        {k: r[k] for k in ("tenant", "plan", "item", "quantity_raw", "amount_micros")}
        for r in _rows(spark, out, "invoice_lines", f"date={day}")
    ]
    key = lambda r: (r["tenant"], r["item"])  # noqa: E731
    assert sorted(lines, key=key) == sorted(expected_lines, key=key)


def test_generated_day_matches_independent_computation(spark: Any, roots: tuple[Path, Path]) -> None:
    root, out = roots
    write_records(root, "usage", synthetic_usage(DAY, tenants=6, brokers=3, minutes=120, replay_every=7))
    jobs.run_job(spark, "billing", DAY, str(root), str(out))
    _compare_with_reference(spark, root, out, DAY)


def test_rerun_is_identical_and_late_records_are_picked_up(spark: Any, roots: tuple[Path, Path]) -> None:
    # given two billed days
    root, out = roots
    before = "2025-03-09"
    write_records(root, "usage", synthetic_usage(before, tenants=3, brokers=2, minutes=30, seed=1))
    write_records(root, "usage", synthetic_usage(DAY, tenants=3, brokers=2, minutes=30, seed=2))
    jobs.run_job(spark, "billing", before, str(root), str(out))
    jobs.run_job(spark, "billing", DAY, str(root), str(out))
    first = {t: _rows(spark, out, t, f"date={DAY}") for t in ("usage_daily", "invoice_lines")}
    invoice_first = _rows(spark, out, "invoices", "month=2025-03")
    # when the same day runs again: identical rows
    again = jobs.run_job(spark, "billing", DAY, str(root), str(out), late_days=1)
    assert {t: _rows(spark, out, t, f"date={DAY}") for t in ("usage_daily", "invoice_lines")} == first
    assert _rows(spark, out, "invoices", "month=2025-03") == invoice_first
    assert again.days[1].skipped  # the day before did not change: not recomputed
    # when a broker delivers a late file for the day before (its own partition)
    late_minute = datetime.fromisoformat(f"{before}T22:00:00+00:00")
    late = usage_record("late-broker", "tenant-0000", late_minute, 100, 4096 * 100, 0, 0, 100, 0,
                        late_minute + timedelta(days=1))  # fmt: skip
    write_records(root, "usage", [late], seq=9)
    rerun = jobs.run_job(spark, "billing", DAY, str(root), str(out), late_days=1)
    # then the day before is re-run
    by_day = {d.date: d for d in rerun.days}
    assert not by_day[before].skipped
    _compare_with_reference(spark, root, out, before)
    usage_before = {r["tenant"]: r for r in _rows(spark, out, "usage_daily", f"date={before}")}
    assert usage_before["tenant-0000"]["messages_in"] >= 100
    invoice = {r["tenant"]: r for r in _rows(spark, out, "invoices", "month=2025-03")}
    old = {r["tenant"]: r for r in invoice_first}
    assert invoice["tenant-0000"]["usage_micros"] > old["tenant-0000"]["usage_micros"]
    # and a second nightly run finds nothing changed
    assert _last_run_skips(spark, root, out)


def test_a_new_installation_s_first_night_skips_the_days_before_it(spark: Any, tmp_path: Path) -> None:
    # given: the first nightly run of a new installation: its exports and usage start on DAY
    root, out = tmp_path / "metering", tmp_path / "analytics"
    write_control_exports(root, DAY, PRICES)
    write_records(root, "usage", synthetic_usage(DAY, tenants=2, brokers=1, minutes=10, seed=3))
    # when: the run looks back over its late days, which have no inputs and never ran
    result = jobs.run_job(spark, "billing", DAY, str(root), str(out), late_days=3)
    # then: DAY is billed; the days before it are skipped, not failed for want of an export
    assert [(d.date, d.skipped) for d in result.days] == [
        (DAY, False),
        ("2025-03-09", True),
        ("2025-03-08", True),
        ("2025-03-07", True),
    ]
    assert result.days[0].rows_in > 0 and _rows(spark, out, "usage_daily", f"date={DAY}")


def _last_run_skips(spark: Any, root: Path, out: Path) -> bool:
    from analytics import io

    files = io.list_files(spark, f"{root}/usage/date=2025-03-09/hour=*/*.jsonl")
    return jobs._last_fingerprint(spark, str(out), "billing", "2025-03-09") == io.fingerprint(files)


def test_empty_day_bills_the_fee_only(spark: Any, roots: tuple[Path, Path]) -> None:
    root, out = roots
    result = jobs.run_job(spark, "billing", "2025-03-31", str(root), str(out))
    assert result.days[0].rows_in == 0
    assert _rows(spark, out, "usage_daily", "date=2025-03-31") == []
    assert _rows(spark, out, "invoice_lines", "date=2025-03-31") == []
    invoices = {r["tenant"]: r for r in _rows(spark, out, "invoices", "month=2025-03")}
    assert set(invoices) == {"acme", "initech"}
    assert invoices["acme"]["total"] == Decimal("10.00") and invoices["acme"]["final"] is True


def test_usage_before_the_first_export_is_billed_at_its_prices(spark: Any, tmp_path: Path) -> None:
    # given: usage recorded the day before the control plane first exported its prices
    root, out = tmp_path / "metering", tmp_path / "analytics"
    before = "2025-03-09"
    write_control_exports(root, DAY, PRICES)
    write_records(root, "usage", synthetic_usage(before, tenants=3, brokers=2, minutes=30, seed=5))
    # when: that day is billed
    result = jobs.run_job(spark, "billing", before, str(root), str(out))
    # then: at the first export's prices, the figures as computed independently
    assert result.days[0].rows_in > 0
    _compare_with_reference(spark, root, out, before)


def test_missing_price_export_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    write_records(tmp_path / "m", "usage", synthetic_usage(DAY, tenants=1, brokers=1, minutes=2))
    with pytest.raises(jobs.AnalyticsInputError, match=r"no prices export under .*export_analytics_inputs"):
        jobs.run_job(spark, "billing", DAY, str(tmp_path / "m"), str(tmp_path / "out"))
