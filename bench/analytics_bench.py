"""Billing job benchmark: records per second on local Spark, checked against an independent computation.

    uv run python bench/analytics_bench.py [--quick] [--json PATH] [--dir DIR] [--master local[*]]

Generates usage records in the broker format (docs/metering.md: hourly JSON Lines files, 1 in 50
written twice as a replay), runs the billing job for the day in-process and reports:
billing_records_per_s (records read / job wall time, largest size), totals_match (Spark's usage
and invoice figures equal the totals computed while generating, through analytics.reference
pricing) and seconds per size (1, 3, 10 million records; --quick: 0.1, 0.3, 1 million).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics import io, jobs, reference
from analytics.synthetic import synthetic_usage, write_control_exports

DAY = "2025-03-10"
BROKERS = 10
PRICES = [
    {"tenant": "*", "plan": "standard", "currency": "USD", "price_monthly": "5.00",
     "price_per_million_requests": "0.4000", "price_per_gb_in": "0.0100", "price_per_gb_out": "0.0900",
     "price_per_gb_month": "0.2300", "price_per_topic_day": "0.0100"},
]  # fmt: skip
COUNTERS = ("messages_in", "messages_out", "requests_in_4k", "requests_out_4k", "bytes_in", "bytes_out")


def generate(root: Path, records: int) -> tuple[int, dict[str, dict[str, Any]]]:
    """Write about ``records`` usage records; return the count and the expected usage per tenant."""
    minutes = 1440
    tenants = max(1, records // (BROKERS * minutes))
    handles: dict[tuple[str, str], TextIO] = {}
    expected: dict[str, dict[str, Any]] = defaultdict(lambda: dict.fromkeys((*COUNTERS, "api_calls"), 0))
    hourly: dict[tuple[str, str, str, str], int] = {}
    topics: dict[str, set[str]] = defaultdict(set)
    seen: dict[str, dict[str, Any]] = {}
    written = 0
    for r in synthetic_usage(DAY, tenants=tenants, brokers=BROKERS, minutes=minutes, replay_every=50):
        when = str(r.get("minute") or r["ts"])
        key = (when[11:13], r["broker"])
        if key not in handles:
            directory = root / "usage" / f"date={DAY}" / f"hour={key[0]}"
            directory.mkdir(parents=True, exist_ok=True)
            # one open file per hour and broker, streamed to: 10 million records do not fit in memory
            handles[key] = open(directory / f"{key[1]}-0-0.jsonl", "w")  # noqa: SIM115
        handles[key].write(json.dumps(r, separators=(",", ":")) + "\n")
        written += 1
        row = expected[r["tenant"]]
        if r["kind"] == "usage":
            previous = seen.pop(r["id"], None)  # a replay follows its original: the later copy wins
            for c in COUNTERS:
                row[c] += r[c] - (previous[c] if previous else 0)
            row["api_calls"] += sum(r["api_calls"].values()) - (
                sum(previous["api_calls"].values()) if previous else 0
            )
            seen = {r["id"]: r}
        else:
            hourly[(r["tenant"], r["broker"], r["topic"], r["ts"][11:13])] = r["bytes"]
            topics[r["tenant"]].add(r["topic"])
    for f in handles.values():
        f.close()
    for (tenant, *_), size in hourly.items():
        expected[tenant]["storage_byte_hours"] = expected[tenant].get("storage_byte_hours", 0) + size
    for tenant, names in topics.items():
        expected[tenant]["topic_days"] = len(names)
    return written, dict(expected)


def run_size(spark: Any, base: Path, records: int) -> dict[str, Any]:
    root, out = base / f"in-{records}", base / f"out-{records}"
    written, expected = generate(root, records)
    write_control_exports(root, DAY, PRICES)
    started = time.perf_counter()
    # the figure is the billing computation; the run report (analytics.report) is not timed
    result = jobs.run_job(spark, "billing", DAY, str(root), str(out), report=False)
    seconds = time.perf_counter() - started
    usage = {
        r["tenant"]: r.asDict()
        for r in spark.read.parquet(str(out / "usage_daily" / f"date={DAY}")).collect()
    }
    got = {t: {k: r[k] for k in expected[t]} for t, r in usage.items()}
    prices = {p["tenant"]: p for p in PRICES}
    lines = reference.invoice_lines({t: {**v, "storage_byte_hours": v.get("storage_byte_hours", 0),
                                         "topic_days": v.get("topic_days", 0)} for t, v in expected.items()},
                                    prices)  # fmt: skip
    want = {t: v["total_micros"] for t, v in reference.monthly_invoice(lines, prices).items()}
    invoices = spark.read.parquet(str(out / "invoices" / f"month={DAY[:7]}")).collect()
    have = {r["tenant"]: r["total_micros"] for r in invoices}
    shutil.rmtree(root, ignore_errors=True)
    return {
        "records": written,
        "rows_in": result.days[0].rows_in,
        "seconds": round(seconds, 2),
        "records_per_s": round(written / seconds),
        "totals_match": got == expected and have == want and result.days[0].rows_in == written,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    sizes = (100_000, 300_000, 1_000_000) if args.quick else (1_000_000, 3_000_000, 10_000_000)
    base = Path(tempfile.mkdtemp(prefix="analytics-bench-", dir=args.dir))
    spark = io.build_session(args.master, "analytics-bench", shuffle_partitions=8)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        runs = [run_size(spark, base, n) for n in sizes]
    finally:
        spark.stop()
        shutil.rmtree(base, ignore_errors=True)
    figures = {
        "billing_records_per_s": runs[-1]["records_per_s"],
        "totals_match": all(r["totals_match"] for r in runs),
        "seconds_by_records": {str(r["records"]): r["seconds"] for r in runs},
        "growth_ratio": round(runs[-1]["seconds"] / runs[0]["seconds"], 2),
        "records_ratio": round(runs[-1]["records"] / runs[0]["records"], 2),
        "runs": runs,
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
