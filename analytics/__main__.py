"""Thin entry point: ``python -m analytics billing|lag --date YYYY-MM-DD`` (also what spark-submit runs).

    python -m analytics billing --date 2025-01-31 [--input URL] [--output URL] [--master local[*]]
        [--late-days 3] [--summary PATH]
    python -m analytics lag --date 2025-01-31 [--stuck-minutes 10] ...
    spark-submit --master spark://host:7077 analytics/__main__.py billing --date 2025-01-31

Defaults come from the environment (``analytics.config``). The summary (rows in/out per day) is
written as JSON to ``--summary`` (or stdout). Exit codes: 0 ok, 2 bad input, 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import date
from pathlib import Path

from analytics.config import AnalyticsSettings
from analytics.constants import JOBS
from analytics.errors import AnalyticsError

__all__ = ("main", "parse_args")

logger = logging.getLogger("analytics")


def _iso_date(value: str) -> str:
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {value!r}") from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = AnalyticsSettings()
    parser = argparse.ArgumentParser(prog="python -m analytics", description=__doc__.split("\n")[0])
    parser.add_argument("job", choices=JOBS)
    parser.add_argument("--date", required=True, type=_iso_date, help="the UTC day to compute")
    parser.add_argument("--input", default=env.input_root(), help="metering root (MQ_METERING_URL)")
    parser.add_argument("--output", default=env.output_root(), help="output root (MQ_ANALYTICS_URL)")
    parser.add_argument("--master", default=env.spark_master, help="Spark master (SPARK_MASTER)")
    parser.add_argument(
        "--late-days", type=int, default=env.late_days, help="re-run changed days this far back"
    )
    parser.add_argument("--stuck-minutes", type=int, default=env.stuck_minutes)
    parser.add_argument("--shuffle-partitions", type=int, default=env.shuffle_partitions)
    parser.add_argument("--summary", type=Path, default=None, help="write the run summary (JSON) here")
    args = parser.parse_args(argv)
    if not 0 <= args.late_days <= 31:
        parser.error("--late-days must be between 0 and 31")
    if not 1 <= args.stuck_minutes <= 60:
        parser.error("--stuck-minutes must be between 1 and 60")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # pyspark is imported only now so that --help and argument errors stay fast
    from analytics import io, jobs

    spark = io.build_session(args.master, f"mqcloud-{args.job}-{args.date}", args.shuffle_partitions)
    spark.sparkContext.setLogLevel("WARN")
    try:
        result = jobs.run_job(
            spark, args.job, args.date, args.input, args.output, args.late_days, args.stuck_minutes
        )
    except AnalyticsError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    finally:
        spark.stop()
    summary = json.dumps(result.as_dict(), indent=2)
    if args.summary:
        args.summary.write_text(summary)
    else:
        sys.stdout.write(summary + "\n")
    for day in result.days:
        state = "unchanged, skipped" if day.skipped else f"{day.rows_in} records in, {day.rows_out} rows out"
        logger.info("%s %s: %s", args.job, day.date, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
