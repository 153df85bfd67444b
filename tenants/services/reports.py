"""The HTML reports of analytics job runs, as files the console may serve to operators.

Each run's summary (``JobRun.details``, written by ``analytics.jobs.JobResult.as_dict``) names the
report directory of the requested day (``report``) and of every late day it re-ran
(``days[i].report``). A report is ``index.html``, its ``*.png`` charts and ``report.json``; nothing
else is served, and nothing outside those directories: a request path is a file name, optionally
under ``date=YYYY-MM-DD/`` for a late day. ``..``, absolute paths, nested directories and symlinks
leading elsewhere resolve to None (the console's 404).

Reports list every tenant's figures, so they are for platform operators only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenants.choices import AnalyticsJob, JobRunStatus
from tenants.models import JobRun

__all__ = ("REPORT_PAGE", "ReportFile", "ReportLink", "latest_reports", "report_file", "report_links")

REPORT_PAGE = "index.html"
_DAY_DIR = re.compile(r"date=\d{4}-\d{2}-\d{2}")
_CHART = re.compile(r"[A-Za-z0-9_-]+\.png")
_CONTENT_TYPES = {
    REPORT_PAGE: "text/html; charset=utf-8",
    "report.json": "application/json",
}


@dataclass(frozen=True, slots=True)
class ReportFile:
    path: Path
    content_type: str


@dataclass(frozen=True, slots=True)
class ReportLink:
    """One day's report of a run: its date and its path under the run's report URL."""

    date: str
    prefix: str  # "" for the requested day, "date=D/" for a late day


def _local_dir(url: str) -> Path | None:
    """A local directory for plain paths and ``file:`` URLs; None for object stores (s3a://, ...)."""
    if not url:
        return None
    if url.startswith("file:"):
        return Path(url.removeprefix("file://").removeprefix("file:"))
    return None if "://" in url else Path(url)


def _day_dirs(run: JobRun) -> dict[str, Path]:
    """Request prefix ("" or "date=D") -> the local report directory it stands for."""
    details: dict[str, Any] = run.details if isinstance(run.details, dict) else {}
    dirs: dict[str, Path] = {}
    main = _local_dir(str(details.get("report") or ""))
    if main is not None:
        dirs[""] = main
    for day in details.get("days") or []:
        if not isinstance(day, dict):
            continue
        local = _local_dir(str(day.get("report") or ""))
        if local is not None and not day.get("skipped"):
            dirs[f"date={day.get('date')}"] = local
    return dirs


def report_links(run: JobRun) -> list[ReportLink]:
    """The reports of a run, requested day first; empty when it wrote none (or not on local disk)."""
    dirs = _day_dirs(run)
    main = dirs.get("")
    links = [ReportLink(str(run.date), "")] if main is not None else []
    for prefix, directory in dirs.items():
        if prefix and directory != main:
            links.append(ReportLink(prefix.removeprefix("date="), f"{prefix}/"))
    return links


def latest_reports() -> list[JobRun]:
    """Each job's newest succeeded run that has a report: for operators' shortcuts (every tenant's
    figures are in them, so never for tenant members)."""
    found = []
    for job in AnalyticsJob.values:
        runs = JobRun.objects.filter(job=job, status=JobRunStatus.SUCCEEDED).order_by("-date", "-started")
        run = next((r for r in runs[:10] if report_links(r)), None)  # a few back: old runs may lack one
        if run is not None:
            found.append(run)
    return found


def _content_type(name: str) -> str | None:
    if name in _CONTENT_TYPES:
        return _CONTENT_TYPES[name]
    return "image/png" if _CHART.fullmatch(name) else None


def report_file(run: JobRun, relative: str) -> ReportFile | None:
    """The file of ``run``'s report at ``relative`` ("" means the page), or None when there is none.

    Only a known file name (optionally under one ``date=D/`` day directory of this run) is looked
    up, and the resolved file must sit directly in that report directory: ``..``, absolute paths
    and symlinks out of it are None.
    """
    parts = relative.split("/") if relative else []
    prefix = ""
    if parts and _DAY_DIR.fullmatch(parts[0]):
        prefix = parts.pop(0)
    if not parts or parts == [""]:
        parts = [REPORT_PAGE]
    if len(parts) != 1:
        return None
    name = parts[0]
    content_type = _content_type(name)
    directory = _day_dirs(run).get(prefix)
    if content_type is None or directory is None:
        return None
    try:
        base = directory.resolve(strict=True)
        target = (base / name).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return None
    if target.parent != base or not target.is_file():
        return None
    return ReportFile(target, content_type)
