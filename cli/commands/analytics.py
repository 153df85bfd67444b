"""``mqctl analytics``: run the nightly jobs by hand and see how past runs went."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Annotated

import typer

from cli import output
from cli.errors import CliError, ExitCode
from cli.options import Output
from cli.session import current

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="Analytics jobs (billing, lag): run one, list past runs.")

JOB_RUN_COLUMNS = (
    "id",
    "job",
    "date",
    "status",
    "trigger",
    "attempt",
    "started",
    "duration_s",
    "rows_out",
    "error",
)
USAGE_ERROR = 2  # python -m analytics: 2 is bad input, 1 anything else


class Job(StrEnum):
    BILLING = "billing"
    LAG = "lag"


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    job: Annotated[Job, typer.Argument(help="Which job.", case_sensitive=False)],
    date: Annotated[
        str | None, typer.Option("--date", help="Day to compute, YYYY-MM-DD (default: yesterday, UTC).")
    ] = None,
) -> None:
    """Run ``python -m analytics JOB --date D`` on this machine; its output streams through.

    Arguments after ``--`` go to the job (e.g. ``-- --master local[2] --input DIR``). The job's exit
    code decides ours: 2 (bad input) stays 2, any other failure is 1.

    \b
    Examples:
      mqctl analytics run billing --date 2026-01-31
      mqctl analytics run lag -- --master local[2]
    """
    import subprocess
    import sys

    day = date or (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)).isoformat()
    try:
        dt.date.fromisoformat(day)
    except ValueError as exc:
        raise CliError(f"--date wants YYYY-MM-DD, got {day!r}", ExitCode.USAGE) from exc
    argv = [sys.executable, "-m", "analytics", job.value, "--date", day, *ctx.args]
    output.info(f"running {' '.join(argv[1:])}")
    code = subprocess.call(argv)
    if code != 0:
        exit_code = ExitCode.USAGE if code == USAGE_ERROR else ExitCode.ERROR
        raise CliError(f"analytics {job.value} --date {day} failed with exit code {code}", exit_code)
    output.success(f"analytics {job.value} for {day} done")


@app.command("jobs")
def jobs(
    job: Annotated[Job | None, typer.Option("--job", case_sensitive=False, help="Only this job.")] = None,
    status: Annotated[str | None, typer.Option("--status", help="Only runs in this status.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Most recent N runs.")] = 20,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Recent job runs, newest first (operators)."""
    page = (
        current()
        .api()
        .get("job-runs/", job=job.value if job else None, status=status, limit=limit, ordering="-started")
    )
    rows = page.get("results", []) if isinstance(page, dict) else page
    output.emit(rows, fmt, JOB_RUN_COLUMNS)
