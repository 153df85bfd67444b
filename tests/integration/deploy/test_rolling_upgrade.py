"""docs/operations.md's node-by-node upgrade, shown on the local production topology: every broker
of a group is stopped (SIGTERM) and started again in turn while a tenant produces and consumes;
producers stay available and no acknowledged message is lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]


def test_broker_group_upgraded_node_by_node_stays_available(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["MQ_ANALYTICS_NIGHTLY_AT"] = "off"  # no Spark jobs' load at 02:30 UTC
    report = tmp_path / "upgrade.md"
    done = subprocess.run(
        [
            sys.executable,
            "scripts/soak.py",
            "--rolling-restart",
            # the upgrade is over by about t=20 s; the rest shows producers keep being served after it
            "--duration",
            "50s",
            "--fault-interval",
            "15s",
            "--tenants",
            "1",
            "--rate",
            "25",
            "--state-dir",
            str(tmp_path / "cluster"),
            "--report",
            str(report),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=560,
        check=False,
    )
    print(done.stdout[-40000:], done.stderr[-3000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    page = report.read_text()
    assert "**PASS**" in page
    upgraded = [line for line in page.splitlines() if "| SIGTERM+restart |" in line]
    assert sorted(line.split("|")[3].strip() for line in upgraded) == [f"broker-a-{i}" for i in range(3)]
    row = next(line for line in page.splitlines() if line.startswith("| soak0 |"))
    cells = [c.strip() for c in row.split("|")]
    acknowledged, missing, longest_gap = int(cells[3]), int(cells[5]), float(cells[8])
    assert acknowledged > 500 and missing == 0 and longest_gap <= 15, row
