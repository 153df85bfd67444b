"""docs/cli.md's command reference is generated from the command tree and must not go stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_cli_reference_is_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/cli_docs.py", "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr + "\n(run: uv run python scripts/cli_docs.py)"


def test_every_command_is_documented_with_its_env_vars() -> None:
    doc = (REPO_ROOT / "docs" / "cli.md").read_text()
    for command in (
        "topic create",
        "message tail",
        "dlq redrive",
        "cluster node add",
        "analytics run",
        "login",
    ):
        assert f"#### `mqctl {command}`" in doc, command
    assert "`MQCTL_TOPIC_CREATE_QUEUES`" in doc
