"""The 3-minute variant of ``make soak``: the production topology under load by several tenants
while brokers and controllers are killed and paused; every acknowledged message comes back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def test_three_minute_soak_loses_nothing(tmp_path: Path) -> None:
    # The soak brings its own PostgreSQL and Redis, like make soak on a fresh machine.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["MQ_ANALYTICS_NIGHTLY_AT"] = "off"  # no Spark jobs' load at 02:30 UTC
    report = tmp_path / "reliability.md"
    done = subprocess.run(
        [
            sys.executable,
            "scripts/soak.py",
            "--duration",
            os.environ.get("MQ_SOAK_DURATION", "3m"),
            "--fault-interval",
            "35s",
            "--tenants",
            "2",
            "--rate",
            "25",
            "--seed",
            "7",
            "--state-dir",
            str(tmp_path / "soak"),
            "--report",
            str(report),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    print(done.stdout[-6000:], done.stderr[-4000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    page = report.read_text()
    assert "**PASS**" in page
    # faults really happened, and the load really ran for every tenant
    assert page.count("| SIGKILL |") + page.count("| SIGSTOP |") >= 3
    for tenant in ("soak0", "soak1"):
        row = next(line for line in page.splitlines() if line.startswith(f"| {tenant} |"))
        acknowledged, missing = int(row.split("|")[3]), int(row.split("|")[5])
        assert acknowledged > 1000 and missing == 0, row
