"""The two jobs: read one day's inputs, apply the transformations, replace that day's outputs.

A run for day D also looks back ``late_days`` days and re-runs those whose input files changed since
their last successful run (late records land in the partition of their own date), so a nightly run
picks up late data without recomputing days that did not change.
"""

from __future__ import annotations

import calendar
import logging
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analytics import billing, io, lag
from analytics.errors import AnalyticsInputError
from analytics.report import REPORT_PAGE, write_run_report
from analytics.schemas import GROUPS_INPUT, INVOICE_LINES, LAG_DAILY, LAG_INPUT, PRICES_INPUT, USAGE_INPUT

__all__ = ("AnalyticsInputError", "DayResult", "JobResult", "run_billing_day", "run_job", "run_lag_day")

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class DayResult:
    """What one day's run read and wrote."""

    date: str
    rows_in: int = 0
    rows_unique: int = 0
    input_files: int = 0
    fingerprint: str = ""
    outputs: dict[str, int] = field(default_factory=dict)
    skipped: bool = False
    report: str = ""  # the directory of the day's HTML report and charts, once written

    @property
    def rows_out(self) -> int:
        return sum(self.outputs.values())


@dataclass(slots=True)
class JobResult:
    """A whole run: the requested day first, then any late day that was re-run (or skipped)."""

    job: str
    days: list[DayResult]

    def as_dict(self) -> dict[str, Any]:
        days = [{**asdict(d), "rows_out": d.rows_out} for d in self.days]
        ran = [d for d in self.days if not d.skipped]
        first = self.days[0].report if self.days else ""
        return {
            "job": self.job,
            "days": days,
            "rows_in": sum(d.rows_in for d in ran),
            "rows_out": sum(d.rows_out for d in ran),
            # the requested day's report: what the console's job-run page links to
            "report": first,
            "report_page": f"{first}/{REPORT_PAGE}" if first else "",
        }


def _manifest_url(output: str, job: str, day: str) -> str:
    return f"{output}/_manifests/{job}/date={day}"


def _last_fingerprint(spark: SparkSession, output: str, job: str, day: str) -> str | None:
    url = _manifest_url(output, job, day)
    if not io.list_files(spark, f"{url}/*.json"):
        return None
    row = spark.read.json(url).first()
    return str(row["fingerprint"]) if row else None


def _write_manifest(spark: SparkSession, output: str, job: str, result: DayResult) -> None:
    row = [(result.fingerprint, result.input_files, datetime.now(UTC).isoformat())]
    frame = spark.createDataFrame(row, "fingerprint string, input_files long, finished_at string")
    frame.coalesce(1).write.mode("overwrite").json(_manifest_url(output, job, result.date))


def _day_files(spark: SparkSession, root: str, tree: str, day: str) -> list[io.InputFile]:
    return io.list_files(spark, f"{root}/{tree}/date={day}/hour=*/*.jsonl")


def _export(spark: SparkSession, root: str, tree: str, day: str, schema: Any, required: bool) -> DataFrame:
    """The newest control-plane export on or before ``day`` (prices, groups); for a day before the
    first export (usage recorded before the control plane first exported), the first export: the
    plans it lists are the earliest known."""
    found = io.latest_partition(spark, f"{root}/{tree}", "date", day)
    if found is None:
        found = next(iter(io.list_partitions(spark, f"{root}/{tree}", "date")), None)
    if found is None:
        if required:
            raise AnalyticsInputError(
                f"no {tree} export under {root}/{tree}: run `manage.py export_analytics_inputs` first"
            )
        return spark.createDataFrame([], schema)
    return io.read_json(spark, schema, io.list_files(spark, f"{root}/{tree}/date={found}/*.jsonl"))


def _count_out(df: DataFrame) -> int:
    return int(df.count())


def run_billing_day(spark: SparkSession, day: str, root: str, output: str) -> DayResult:
    """Usage, invoice lines for ``day`` and the month-to-date invoice of its month."""
    files = _day_files(spark, root, "usage", day)
    result = DayResult(day, input_files=len(files), fingerprint=io.fingerprint(files))
    unique = billing.dedupe(io.read_json(spark, USAGE_INPUT, files)).cache()
    try:
        result.rows_in, result.rows_unique = billing.record_counts(unique)
        usage = billing.usage_daily(unique, day).orderBy("tenant").cache()
        prices = _export(spark, root, "prices", day, PRICES_INPUT, required=True).cache()
        missing = billing.unpriced_tenants(usage, prices)
        if missing:
            raise AnalyticsInputError(f"no plan price for tenants {', '.join(missing)} and no default plan")
        io.write_partition(usage, f"{output}/usage_daily/date={day}")
        lines = billing.invoice_lines(usage, prices).orderBy("tenant", "item").cache()
        io.write_partition(lines, f"{output}/invoice_lines/date={day}")
        result.outputs["usage_daily"] = _count_out(usage)
        result.outputs["invoice_lines"] = _count_out(lines)
        result.outputs["invoices"] = _write_invoices(spark, day, output, prices)
        lines.unpersist()
        usage.unpersist()
    finally:
        unique.unpersist()
    return result


def _write_invoices(spark: SparkSession, day: str, output: str, prices: DataFrame) -> int:
    d = date.fromisoformat(day)
    first = d.replace(day=1)
    last = d.replace(day=calendar.monthrange(d.year, d.month)[1])
    month_days = [
        v for v in io.list_partitions(spark, f"{output}/invoice_lines", "date") if v.startswith(day[:7])
    ]
    lines = io.read_parquet(spark, f"{output}/invoice_lines", "date", month_days, INVOICE_LINES)
    invoices = (
        billing.monthly_invoices(
            lines,
            prices,
            first.isoformat(),
            last.isoformat(),
            len(month_days),
            last.isoformat() in month_days,
        )
        .orderBy("tenant")
        .cache()
    )
    io.write_partition(invoices, f"{output}/invoices/month={day[:7]}")
    count = _count_out(invoices)
    invoices.unpersist()
    return count


def run_lag_day(spark: SparkSession, day: str, root: str, output: str, stuck_after: int) -> DayResult:
    """Lag percentiles, SLO minutes, stuck queues and the week-over-week trend of every group."""
    files = _day_files(spark, root, "lag", day)
    result = DayResult(day, input_files=len(files), fingerprint=io.fingerprint(files))
    previous_day = (date.fromisoformat(day) - timedelta(days=1)).isoformat()
    # the previous day's last hour lets the first minutes of the day be judged for stuck queues
    context = io.list_files(spark, f"{root}/lag/date={previous_day}/hour=23/*.jsonl")
    unique = billing.dedupe(io.read_json(spark, LAG_INPUT, files + context)).cache()
    first_minute = int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp()) // 60
    queues = lag.queue_minutes(unique).cache()
    try:
        in_day = unique.filter(F.substring("ts", 1, 10) == day)
        result.rows_in, result.rows_unique = billing.record_counts(in_day)
        minutes = lag.group_minutes(queues, first_minute)
        stuck = lag.stuck_queue_minutes(queues, first_minute, stuck_after)
        groups = _export(spark, root, "groups", day, GROUPS_INPUT, required=False)
        week = [(date.fromisoformat(day) - timedelta(days=k)).isoformat() for k in range(7, 0, -1)]
        done = set(io.list_partitions(spark, f"{output}/lag_daily", "date"))
        previous = io.read_parquet(
            spark, f"{output}/lag_daily", "date", [d for d in week if d in done], LAG_DAILY
        )
        daily = lag.lag_daily(minutes, stuck, groups, previous).orderBy("tenant", "group").cache()
        io.write_partition(daily, f"{output}/lag_daily/date={day}")
        result.outputs["lag_daily"] = _count_out(daily)
        daily.unpersist()
    finally:
        queues.unpersist()
        unique.unpersist()
    return result


def run_job(
    spark: SparkSession,
    job: str,
    day: str,
    root: str,
    output: str,
    late_days: int = 0,
    stuck_after: int = 10,
    report: bool = True,
) -> JobResult:
    """Run ``day``, then re-run each of the ``late_days`` days before it whose inputs changed (a day
    that never ran counts as changed once it has inputs).

    With ``report``, every day that ran also gets its HTML report and charts (``analytics.report``),
    written once all days ran: a late day's re-run changes the month's invoices the reports show.
    """
    root, output = root.rstrip("/"), output.rstrip("/")

    def run_day(d: str) -> DayResult:
        if job == "billing":
            result = run_billing_day(spark, d, root, output)
        elif job == "lag":
            result = run_lag_day(spark, d, root, output, stuck_after)
        else:
            raise AnalyticsInputError(f"unknown job {job!r}: use billing or lag")
        return result

    results = [run_day(day)]
    _write_manifest(spark, output, job, results[0])
    for k in range(1, late_days + 1):
        earlier = (date.fromisoformat(day) - timedelta(days=k)).isoformat()
        files = _day_files(spark, root, "usage" if job == "billing" else "lag", earlier)
        current = io.fingerprint(files)
        last = _last_fingerprint(spark, output, job, earlier)
        # A day that never ran and has no inputs has nothing to (re-)run: a new installation's first
        # nights look back at days before it existed (billed, they would invoice monthly fees for them).
        if last == current or (last is None and not files):
            results.append(DayResult(earlier, input_files=len(files), fingerprint=current, skipped=True))
            continue
        logger.info("%s: inputs of %s changed since its last run; re-running it", job, earlier)
        result = run_day(earlier)
        _write_manifest(spark, output, job, result)
        results.append(result)
    if report:
        for result in sorted(results, key=lambda r: r.date):
            if not result.skipped:
                result.report = write_run_report(spark, job, result, output)
    return JobResult(job, results)
