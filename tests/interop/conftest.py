"""Interop fixtures: the official clients installed once into a cache dir, and a real broker.

- Python: ``python3.11 -m venv ~/.cache/mqcloud-interop/py`` + ``pip install rocketmq-python-client==5.1.2``
  (its grpcio/protobuf pins differ from ours, hence a separate venv).
- Node.js: ``npm install rocketmq-client-nodejs@1.0.8`` into ``~/.cache/mqcloud-interop/node``.

Set ``MQCLOUD_INTEROP_CACHE`` to move the cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqcloud.admin_client import BrokerAdminClient
from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess

PY_CLIENT = "rocketmq-python-client==5.1.2"
NODE_CLIENT = "rocketmq-client-nodejs@1.0.8"
CACHE = Path(os.environ.get("MQCLOUD_INTEROP_CACHE", Path.home() / ".cache" / "mqcloud-interop"))
DRIVERS = Path(__file__).parent / "drivers"
NAMESPACE = "interop"


def _run(cmd: list[str], cwd: Path | None = None, timeout: float = 540) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def _install_node() -> None:
    """Install Node.js and npm from the distribution's packages, as the machine allows."""
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=False, env=env, timeout=300)
    subprocess.run(
        [*sudo, "apt-get", "install", "-y", "-qq", "nodejs", "npm"], check=False, env=env, timeout=600
    )
    if shutil.which("npm") is None:
        pytest.fail("npm is needed for the Node.js interop tests and could not be installed")


@contextlib.contextmanager
def _installing(name: str) -> Iterator[None]:
    """Held while one install into the cache runs: two test processes sharing the cache (a ``pytest
    -n`` run without ``--dist loadgroup``, two checkouts) would otherwise build the same venv or
    node_modules at once, and both fail."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def py_client() -> Path:
    """The interop venv's python, with the official client importable."""
    with _installing("py"):
        return _py_client()


def _py_client() -> Path:
    venv = CACHE / "py"
    python = venv / "bin" / "python"
    marker = venv / f".installed-{PY_CLIENT}"
    if not marker.exists():
        # A venv made from ours has our interpreter but none of our packages: the official
        # client pins its own grpcio/protobuf.
        base = sys.executable
        CACHE.mkdir(parents=True, exist_ok=True)
        # no marker: never made, or an install was cut off and may have left a broken distribution
        # that every later pip run trips over; start from an empty venv
        shutil.rmtree(venv, ignore_errors=True)
        _run([base, "-m", "venv", str(venv)])
        _run([str(python), "-m", "pip", "install", "-q", PY_CLIENT])
        marker.touch()
    return python


@pytest.fixture(scope="session")
def node_client() -> Path:
    """The directory whose node_modules holds the official Node.js client."""
    with _installing("node"):
        return _node_client()


def _node_client() -> Path:
    node_dir = CACHE / "node"
    if not (node_dir / "node_modules" / "rocketmq-client-nodejs" / "package.json").exists():
        if shutil.which("npm") is None:
            _install_node()
        node_dir.mkdir(parents=True, exist_ok=True)
        if not (node_dir / "package.json").exists():
            (node_dir / "package.json").write_text('{"name": "mqcloud-interop", "private": true}\n')
        _run(["npm", "install", "--no-audit", "--no-fund", NODE_CLIENT], cwd=node_dir)
    return node_dir


@dataclass
class Interop:
    broker: BrokerProcess
    admin: BrokerAdminClient
    py: Path
    node_dir: Path
    home: Path

    def topic(self, message_type: str = "NORMAL") -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        self.admin.create_topic(
            f"{NAMESPACE}%{name}", queue_count=4, namespace=NAMESPACE, message_type=message_type
        )
        return name

    def group(self, **kwargs: object) -> str:
        name = f"g-{uuid.uuid4().hex[:8]}"
        self.admin.create_group(f"{NAMESPACE}%{name}", namespace=NAMESPACE, **kwargs)  # type: ignore[arg-type]
        return name

    def run(
        self,
        lang: str,
        mode: str,
        topic: str,
        group: str = "",
        *,
        count: int = 10,
        prefix: str = "",
        invisible: int = 3,
        timeout: float = 40,
        delay: float = 5,
        credentials: tuple[str, str] | None = None,
        tls: bool = False,
        env: dict[str, str] | None = None,
    ) -> dict[str, list[dict[str, object]]]:
        proc = self.run_raw(
            lang, mode, topic, group, count=count, prefix=prefix, invisible=invisible, timeout=timeout,
            delay=delay, credentials=credentials, tls=tls, env=env,
        )  # fmt: skip
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise AssertionError(
                f"{lang} {mode} exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
                f"stderr:\n{proc.stderr[-3000:]}\nbroker:\n" + "".join(self.broker.output[-30:])
            )
        result: dict[str, list[dict[str, object]]] = json.loads(lines[-1])
        return result

    def run_raw(
        self,
        lang: str,
        mode: str,
        topic: str,
        group: str = "",
        *,
        count: int = 10,
        prefix: str = "",
        invisible: int = 3,
        timeout: float = 40,
        delay: float = 5,
        credentials: tuple[str, str] | None = None,
        tls: bool = False,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a driver and return the finished process, whatever its exit code."""
        args = [
            mode,
            "--endpoint",
            self.broker.target,
            "--namespace",
            NAMESPACE,
            "--topic",
            topic,
            "--group",
            group,
            "--count",
            str(count),
            "--prefix",
            prefix or lang,
            "--invisible",
            str(invisible),
            "--timeout",
            str(timeout),
            "--delay",
            str(delay),
        ]
        if credentials is not None:
            args += ["--ak", credentials[0], "--sk", credentials[1]]
        if tls:
            args += ["--tls", "1"]
        env = {**os.environ, "HOME": str(self.home), **(env or {})}  # the clients log under ~/logs
        if lang == "py":
            cmd = [str(self.py), str(DRIVERS / "py_driver.py"), *args]
            env.pop("PYTHONPATH", None)
        else:
            cmd = ["node", str(DRIVERS / "node_driver.js"), *args]
            env["NODE_PATH"] = str(self.node_dir / "node_modules")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60, env=env)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(
                f"{lang} {mode} timed out\n{e.stdout!r}\n{e.stderr!r}\n" + "".join(self.broker.output[-30:])
            ) from e
        return proc


@pytest.fixture
def interop(
    py_client: Path, node_client: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Interop]:
    # transaction check-backs after 1 s, then every second (the transaction interop tests wait for them)
    monkeypatch.setenv("MQ_BROKER_TRANSACTION_TIMEOUT_MS", "1000")
    monkeypatch.setenv("MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS", "1000")
    # Long polls of 5 s (the least the Telemetry settings offer): the official Node.js PushConsumer's
    # shutdown waits for its outstanding long poll, 20 s by default, at the end of every push run.
    monkeypatch.setenv("MQ_BROKER_DEFAULT_LONG_POLLING_MS", "5000")
    broker = BrokerProcess(tmp_path / "broker", free_port())
    broker.start()
    admin = BrokerAdminClient(broker.target)
    (tmp_path / "home").mkdir()
    yield Interop(broker, admin, py_client, node_client, tmp_path / "home")
    admin.close()
    broker.kill()


def make_interop(
    py: Path,
    node_dir: Path,
    tmp_path: Path,
    *,
    token: str,
    env: dict[str, str] | None = None,
    ca: Path | None = None,
) -> Interop:
    """An Interop whose broker runs as in production (no development mode) with an admin token."""
    broker = BrokerProcess(
        tmp_path / "broker", free_port(), dev=False, env={"MQ_BROKER_ADMIN_TOKEN": token, **(env or {})}
    )
    broker.start()
    admin = BrokerAdminClient(broker.target, token=token, root_certificates=ca.read_bytes() if ca else None)
    (tmp_path / "home").mkdir(exist_ok=True)
    return Interop(broker, admin, py, node_dir, tmp_path / "home")
