"""The HTML report and PNG charts of each run, written next to the run's Parquet outputs.

    {output}/reports/{job}/date=D/index.html     run facts, charts, every tenant's (or group's) figures
    {output}/reports/{job}/date=D/*.png          charts (billing: tenant_usage, daily_charges;
                                                 lag: lag_percentiles, lag_trend)
    {output}/reports/{job}/date=D/report.json    the same figures, machine-readable

A day's report is replaced as a whole when the day runs again (as its Parquet partitions are). The
run summary (``JobResult.as_dict``, kept in ``JobRun.details`` by the control plane) names it.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from analytics.errors import AnalyticsInputError
from analytics.report.charts import billing_charts, lag_charts
from analytics.report.data import BillingReportData, LagReportData, billing_data, lag_data
from analytics.report.page import billing_page, lag_page

if TYPE_CHECKING:
    from analytics.jobs import DayResult

__all__ = ("REPORT_PAGE", "report_url", "write_run_report")

logger = logging.getLogger(__name__)

REPORT_PAGE = "index.html"


def report_url(output: str, job: str, day: str) -> str:
    """The directory holding a day's report."""
    return f"{output.rstrip('/')}/reports/{job}/date={day}"


def _local_path(url: str) -> Path | None:
    """A local directory for plain paths and ``file://`` URLs; None for object stores (s3a://, ...)."""
    if url.startswith("file:"):
        return Path(url.removeprefix("file://").removeprefix("file:"))
    return None if "://" in url else Path(url)


def _publish(spark: SparkSession, rendered: Path, url: str) -> None:
    """Replace ``url`` with the files of ``rendered``: directly on disk, else through Hadoop's FS."""
    local = _local_path(url)
    if local is not None:
        shutil.rmtree(local, ignore_errors=True)
        shutil.copytree(rendered, local)
        return
    jvm = spark.sparkContext._jvm
    target = jvm.org.apache.hadoop.fs.Path(url)  # type: ignore[union-attr]
    fs = target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[union-attr]
    fs.delete(target, True)
    fs.mkdirs(target)
    for f in sorted(rendered.iterdir()):
        fs.copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path(str(f)), target)  # type: ignore[union-attr]


def _figures(data: BillingReportData | LagReportData) -> dict[str, Any]:
    if isinstance(data, LagReportData):
        return {"groups": data.groups}
    return {
        "usage": data.usage,
        "day_charges_micros": data.day_charges,
        "invoices": data.invoices,
    }


def write_run_report(spark: SparkSession, job: str, day: DayResult, output: str) -> str:
    """Render the report of one computed day from its outputs under ``output``; returns its directory URL."""
    run = {
        "job": job,
        "date": day.date,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "Spark master": spark.sparkContext.master,
        "input files": day.input_files,
        "records read": f"{day.rows_in:,}",
        "records kept (after de-duplication)": f"{day.rows_unique:,}",
        "rows written": ", ".join(f"{k} {v:,}" for k, v in day.outputs.items()),
    }
    data: BillingReportData | LagReportData
    with tempfile.TemporaryDirectory(prefix=f"mqcloud-report-{job}-") as tmp:
        directory = Path(tmp)
        if job == "billing":
            data = billing_data(spark, output, day.date)
            charts = billing_charts(data, directory)
            page = billing_page(data, run, charts)
        elif job == "lag":
            data = lag_data(spark, output, day.date)
            charts = lag_charts(data, directory)
            page = lag_page(data, run, charts)
        else:
            raise AnalyticsInputError(f"no report for job {job!r}")
        (directory / REPORT_PAGE).write_text(page)
        summary = {
            "run": {**run, "day": asdict(day)},
            "page": REPORT_PAGE,
            "charts": charts,
            **_figures(data),
        }
        (directory / "report.json").write_text(json.dumps(summary, indent=1, default=str))
        url = report_url(output, job, day.date)
        _publish(spark, directory, url)
    logger.info("%s %s: report written to %s", job, day.date, url)
    return url
