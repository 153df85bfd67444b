"""One real stack for the mqctl tests: ``mqctl standalone`` (uvicorn control plane on a test SQLite,
a Celery worker on the filesystem transport, a broker), on free ports, shared by the whole session.

Each test gets its own contexts file (``MQCTL_CONFIG`` in tmp) and makes its own tenant, so tests do
not see each other's state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from cli.main import app
from tests.conftest import free_port
from tests.integration.broker.conftest import REPO_ROOT, TEST_SEGMENT_BYTES

STARTUP_TIMEOUT_S = 150.0


@dataclass
class Stack:
    """The running standalone stack and how to reach it."""

    proc: subprocess.Popen[bytes]
    data_dir: Path
    url: str
    token: str
    broker: str
    env: dict[str, str]

    @property
    def admin_token(self) -> str:
        """The broker's operator token, which ``mqctl standalone`` keeps in its data dir."""
        return (self.data_dir / "broker-admin-token").read_text().strip()

    def manage(self, *args: str) -> str:
        """``manage.py ARGS`` against the stack's database; its stdout."""
        done = subprocess.run(
            [sys.executable, str(REPO_ROOT / "manage.py"), *args],
            cwd=REPO_ROOT,
            env={**self.env, "MQ_DATA_DIR": str(self.data_dir), "DJANGO_SETTINGS_MODULE": "config.settings"},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout

    def create_user(self, username: str, staff: bool = False) -> str:
        """A user with an API token (the token is printed by the shell snippet)."""
        code = (
            "from django.contrib.auth import get_user_model;"
            "from rest_framework.authtoken.models import Token;"
            f"u = get_user_model().objects.create_user({username!r}, is_staff={staff});"
            "print(Token.objects.create(user=u).key)"
        )
        return self.manage("shell", "-c", code).strip().splitlines()[-1]


def _stack_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL") and not k.startswith("MQCTL_")
    }
    env["MQ_BROKER_COMMIT_LOG_SEGMENT_BYTES"] = str(TEST_SEGMENT_BYTES)
    env["MQ_RECONCILE_INTERVAL_S"] = "3600"  # provisioning tasks do the work; no periodic noise
    # nor the nightly Spark jobs: at 02:30 UTC they would take the 2 cores' time from the tests
    # (they have a worker of their own, so provisioning no longer waits for them: test_analytics_queue)
    env["MQ_ANALYTICS_NIGHTLY_AT"] = "off"
    return env


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("cli-stack") / "data"
    http_port, broker_port = free_port(), free_port()
    env = _stack_env()
    log = (data_dir.parent / "standalone.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "standalone",
            "--data-dir",
            str(data_dir),
            "--http",
            f"127.0.0.1:{http_port}",
            "--broker",
            f"127.0.0.1:{broker_port}",
            "--metrics",
            "",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{http_port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        demo: dict[str, Any] = {}
        while True:
            if proc.poll() is not None:
                raise RuntimeError("standalone exited:\n" + (data_dir.parent / "standalone.log").read_text())
            demo_path = data_dir / "demo.json"
            if demo_path.exists():
                try:
                    demo = json.loads(demo_path.read_text())
                    if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200 and demo.get("broker"):
                        break
                except (ValueError, httpx.HTTPError):
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    "standalone did not come up:\n" + (data_dir.parent / "standalone.log").read_text()
                )
            time.sleep(0.5)
        yield Stack(proc, data_dir, url, str(demo["api"]["token"]), str(demo["broker"]["endpoint"]), env)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log.close()


@dataclass
class Mqctl:
    """Runs mqctl in-process (Typer's CliRunner) with its own contexts file."""

    config: Path
    env: dict[str, str]

    def __call__(self, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        runner = CliRunner()
        return runner.invoke(app, list(args), input=input, env={**self.env, **(env or {})})

    def ok(self, *args: str, input: str | None = None) -> Result:
        result = self(*args, input=input)
        assert result.exit_code == 0, f"mqctl {' '.join(args)} -> {result.exit_code}\n{result.output}"
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "-o", "json").stdout)


@pytest.fixture
def mqctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Mqctl:
    """mqctl with an empty contexts file in tmp and no MQCTL_ variables from the outer environment."""
    for name in list(os.environ):
        if name.startswith("MQCTL_"):
            monkeypatch.delenv(name)
    config = tmp_path / "mqctl" / "contexts.json"
    return Mqctl(config, {"MQCTL_CONFIG": str(config)})


@pytest.fixture
def operator(stack: Stack, mqctl: Mqctl) -> Mqctl:
    """mqctl logged in to the stack as the demo operator."""
    mqctl.ok("login", "--url", stack.url, "--token", stack.token)
    return mqctl


@pytest.fixture
def tenant(operator: Mqctl) -> str:
    """A fresh tenant, made the context's default."""
    namespace = f"t{uuid.uuid4().hex[:10]}"
    operator.ok("tenant", "create", namespace, "--name", f"Tenant {namespace}")
    operator.ok("context", "set", "--tenant", namespace)
    return namespace


def run_mqctl(args: Sequence[str], config: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """mqctl as a real subprocess (the installed entry point's module)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    env["MQCTL_CONFIG"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=kwargs.pop("timeout", 120),
        **kwargs,
    )
