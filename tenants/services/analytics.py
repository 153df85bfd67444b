"""Running the nightly analytics jobs from the control plane, and exporting what they need.

- ``export_analytics_inputs``: the plan prices of every tenant (and the default plan as tenant ``*``)
  and the consumer groups' lag SLOs, written as JSON Lines under the metering root, one partition
  per day, so a re-run of an old day bills with the prices of that day.
- ``run_analytics_job``: a JobRun row (at most one running per job and day), ``spark-submit`` of
  ``analytics/__main__.py`` with the configured master, then the loader writes the results into
  the database. Failures are recorded on the row and raised as ``AnalyticsJobFailed`` so the Celery
  task retries.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from pyarrow import fs as pafs

from tenants.choices import JobRunStatus, JobTrigger
from tenants.errors import AnalyticsJobFailed
from tenants.models import ConsumerGroup, JobRun, Plan, Tenant

__all__ = (
    "export_analytics_inputs",
    "run_analytics_job",
    "spark_submit_command",
    "yesterday",
)

logger = logging.getLogger(__name__)

_PRICE_FIELDS = (
    "price_monthly",
    "price_per_million_requests",
    "price_per_gb_in",
    "price_per_gb_out",
    "price_per_gb_month",
    "price_per_topic_day",
)
_ERROR_TAIL = 4000


def yesterday() -> date:
    return timezone.now().date() - timedelta(days=1)


def _filesystem(url: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem for an object-store URL (s3://, gs://, ...) or a local directory."""
    if "://" in url and not url.startswith("file://"):
        filesystem, path = pafs.FileSystem.from_uri(url)
        return filesystem, str(path)
    local = url.removeprefix("file://")
    return pafs.LocalFileSystem(), str(Path(local).resolve())


def _price_row(tenant: str, plan: Plan) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "plan": plan.name,
        "currency": plan.currency,
        **{f: str(getattr(plan, f)) for f in _PRICE_FIELDS},
    }


def export_analytics_inputs(root: str, day: date, force: bool = False) -> dict[str, int]:
    """Write ``prices/date=D/prices.jsonl`` and ``groups/date=D/groups.jsonl`` under ``root``.

    An existing export of the day is kept unless ``force``: it records the prices as they were.
    Returns the rows written per export (0 when kept).
    """
    filesystem, base = _filesystem(root)
    default = Plan.objects.filter(is_default=True).first()
    prices = []
    for tenant in Tenant.objects.select_related("plan"):
        plan = tenant.plan or default
        if plan is not None:
            prices.append(_price_row(tenant.namespace, plan))
    if default is not None:
        prices.append(_price_row("*", default))
    groups = [
        {"tenant": ns, "group": name, "lag_slo_messages": msgs, "lag_slo_seconds": secs}
        for ns, name, msgs, secs in ConsumerGroup.objects.values_list(
            "tenant__namespace", "name", "lag_slo_messages", "lag_slo_seconds"
        )
    ]
    written = {}
    for tree, rows in (("prices", prices), ("groups", groups)):
        directory = f"{base}/{tree}/date={day.isoformat()}"
        target = f"{directory}/{tree}.jsonl"
        if not force and filesystem.get_file_info(target).type != pafs.FileType.NotFound:
            written[tree] = 0
            continue
        filesystem.create_dir(directory, recursive=True)
        with filesystem.open_output_stream(target) as out:
            out.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode())
        written[tree] = len(rows)
    return written


def _spark_submit() -> str:
    """The spark-submit that ships with pyspark in this environment, else the one on PATH."""
    found = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or shutil.which(
        "spark-submit"
    )
    if found is None:
        raise AnalyticsJobFailed("spark-submit not found: install pyspark (or Spark) on this worker")
    return found


def spark_submit_command(job: str, day: date, summary: Path) -> list[str]:
    conf = settings.MQ_ANALYTICS
    script = Path(settings.BASE_DIR) / "analytics" / "__main__.py"
    return [
        _spark_submit(),
        "--master", conf["SPARK_MASTER"],
        "--name", f"mqcloud-{job}-{day.isoformat()}",
        "--conf", "spark.ui.showConsoleProgress=false",
        str(script), job,
        "--date", day.isoformat(),
        "--input", conf["INPUT_URL"],
        "--output", conf["OUTPUT_URL"],
        "--master", conf["SPARK_MASTER"],
        "--late-days", str(conf["LATE_DAYS"]),
        "--stuck-minutes", str(conf["STUCK_MINUTES"]),
        "--summary", str(summary),
    ]  # fmt: skip


def _start(job: str, day: date, trigger: str, attempt: int) -> JobRun | None:
    """A running JobRun, or None when the same job and day is running already (the DB says so)."""
    stale = timezone.now() - timedelta(seconds=float(settings.MQ_ANALYTICS["TIMEOUT_S"]) * 2)
    JobRun.objects.filter(job=job, date=day, status=JobRunStatus.RUNNING, started__lt=stale).update(
        status=JobRunStatus.FAILED,
        finished=timezone.now(),
        error="abandoned: no result within twice the timeout",
    )
    try:
        with transaction.atomic():
            return JobRun.objects.create(
                job=job,
                date=day,
                trigger=trigger,
                attempt=attempt,
                master=settings.MQ_ANALYTICS["SPARK_MASTER"],
            )
    except IntegrityError:
        return None


def _finish(run: JobRun, status: str, error: str = "", **fields: Any) -> JobRun:
    run.status = status
    run.finished = timezone.now()
    run.duration_s = (run.finished - run.started).total_seconds()
    run.error = error[-_ERROR_TAIL:]
    for name, value in fields.items():
        setattr(run, name, value)
    run.save()
    return run


def _submit(job: str, day: date, run: JobRun) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mqcloud-analytics-") as tmp:
        summary = Path(tmp) / "summary.json"
        command = spark_submit_command(job, day, summary)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(settings.BASE_DIR), os.environ.get("PYTHONPATH")])
            ),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        logger.info("analytics %s %s: %s", job, day, " ".join(command))
        try:
            proc = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=env,
                timeout=float(settings.MQ_ANALYTICS["TIMEOUT_S"]),
            )
        except subprocess.TimeoutExpired as exc:
            raise AnalyticsJobFailed(f"spark-submit timed out after {exc.timeout:.0f} s") from exc
        if proc.returncode != 0 or not summary.exists():
            raise AnalyticsJobFailed(
                f"spark-submit exited with {proc.returncode}: {proc.stderr[-_ERROR_TAIL:]}"
            )
        return dict(json.loads(summary.read_text()))


def run_analytics_job(
    job: str, day: date | None = None, trigger: str = JobTrigger.MANUAL, attempt: int = 1
) -> JobRun:
    """Run one job for one day (yesterday by default) end to end; returns its JobRun.

    A second run of the same job and day while one is running is recorded as ``skipped``.
    Raises ``AnalyticsJobFailed`` (after recording it) when Spark or the load fails.
    """
    from analytics import loader  # the loader is the one place analytics touches Django

    day = day or yesterday()
    run = _start(job, day, trigger, attempt)
    if run is None:
        return JobRun.objects.create(
            job=job, date=day, trigger=trigger, attempt=attempt, status=JobRunStatus.SKIPPED,
            finished=timezone.now(), duration_s=0.0, error="the same job and day is already running",
        )  # fmt: skip
    started = time.monotonic()
    try:
        export_analytics_inputs(settings.MQ_ANALYTICS["INPUT_URL"], day)
        summary = _submit(job, day, run)
        days = [d["date"] for d in summary["days"] if not d["skipped"]]
        loaded = loader.load(job, settings.MQ_ANALYTICS["OUTPUT_URL"], days)
    except AnalyticsJobFailed as exc:
        _finish(run, JobRunStatus.FAILED, str(exc))
        raise
    except (OSError, ValueError, KeyError) as exc:
        _finish(run, JobRunStatus.FAILED, f"{type(exc).__name__}: {exc}")
        raise AnalyticsJobFailed(f"{job} {day}: {exc}") from exc
    logger.info("analytics %s %s done in %.1f s", job, day, time.monotonic() - started)
    return _finish(
        run,
        JobRunStatus.SUCCEEDED,
        rows_in=summary["rows_in"],
        rows_out=summary["rows_out"],
        details={**summary, "loaded": loaded},
    )
