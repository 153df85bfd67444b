"""mqctl's root app through its real entry point: help, start-up cost, completion, usage errors."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app

REPO_ROOT = Path(__file__).resolve().parents[3]
GROUPS = (
    "login", "context", "tenant", "key", "topic", "group", "acl", "quota", "usage", "billing", "message",
    "offset", "dlq", "cluster", "analytics", "completion", "standalone", "broker", "admin",
)  # fmt: skip
HEAVY = ("httpx", "grpc", "pydantic", "mqcloud", "rich.console")
runner = CliRunner()


def test_help_lists_command_groups() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    for group in GROUPS:
        assert f"  {group} " in result.output, group


def test_help_is_fast() -> None:
    """``mqctl --help`` costs well under half a second of CPU: heavy imports are deferred."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 0.5, f"mqctl --help took {cpu:.2f} s of CPU"
    probe = "import sys, cli.main; print(sorted(m for m in HEAVY if m in sys.modules))"
    imported = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}; {probe}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert imported.stdout.strip() == "[]", imported.stdout + imported.stderr


def test_every_option_shows_its_environment_variable() -> None:
    help_text = runner.invoke(app, ["topic", "create", "--help"]).output
    for var in ("MQCTL_TENANT", "MQCTL_OUTPUT", "MQCTL_WAIT_TIMEOUT", "MQCTL_TOPIC_CREATE_QUEUES"):
        assert var in help_text, var
    root = runner.invoke(app, ["--help"]).output
    for var in ("MQCTL_CONTEXT", "MQCTL_API_URL", "MQCTL_TOKEN", "MQCTL_DEBUG"):
        assert var in root, var


def test_automatic_environment_variable_is_read(tmp_path: Path) -> None:
    # MQCTL_TOPIC_CREATE_QUEUES=0 is refused by the option's own range check: the variable was read
    result = runner.invoke(
        app,
        ["topic", "create", "x"],
        env={"MQCTL_TOPIC_CREATE_QUEUES": "0", "MQCTL_CONFIG": str(tmp_path / "c")},
    )
    assert result.exit_code == 2
    assert "--queues" in result.output


def test_completion_script() -> None:
    result = runner.invoke(app, ["completion", "bash"])
    assert result.exit_code == 0
    assert "_MQCTL_COMPLETE=complete_bash" in result.stdout
    assert runner.invoke(app, ["completion", "tcsh"]).exit_code == 2


def test_completion_of_context_names(tmp_path: Path) -> None:
    config = tmp_path / "contexts.json"
    config.write_text(
        '{"current": "prod", "contexts": {"prod": {"url": "http://x"}, "staging": {"url": "http://y"}}}'
    )
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "context", "use", "st"],
        cwd=REPO_ROOT,
        env={
            "MQCTL_CONFIG": str(config),
            "_MQCTL_COMPLETE": "complete_bash",
            "COMP_WORDS": "mqctl context use st",
            "COMP_CWORD": "3",
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "staging" in done.stdout and "prod" not in done.stdout


def test_unknown_command_is_a_usage_error() -> None:
    result = runner.invoke(app, ["no-such-command"])
    assert result.exit_code == 2
