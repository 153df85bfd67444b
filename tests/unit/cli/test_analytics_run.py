"""``mqctl analytics run`` hands the job to ``python -m analytics`` and keeps its verdict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app

REPO_ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()


def test_a_bad_date_is_refused_before_anything_runs() -> None:
    result = runner.invoke(app, ["analytics", "run", "billing", "--date", "31/01/2026"])
    assert result.exit_code == 2
    assert "YYYY-MM-DD" in result.stderr


def test_the_jobs_exit_code_is_passed_on() -> None:
    # arguments after -- reach the job; an out-of-range one makes it fail fast, before any Spark work
    job_args = ["billing", "--date", "2026-01-31", "--late-days", "99"]
    direct = subprocess.run(
        [sys.executable, "-m", "analytics", *job_args], cwd=REPO_ROOT, capture_output=True, timeout=120
    )
    assert direct.returncode != 0
    result = runner.invoke(app, ["analytics", "run", *job_args[:3], "--", *job_args[3:]])
    assert result.exit_code == (2 if direct.returncode == 2 else 1)
    assert "analytics billing --date 2026-01-31 failed" in result.stderr
