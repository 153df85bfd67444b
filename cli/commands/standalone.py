"""``mqctl standalone``: the whole stack on one machine with embedded defaults.

Migrates the embedded database, creates the demo operator and tenant, then runs the control plane
(uvicorn, :8000), two Celery workers on the filesystem transport (one with beat; one for the nightly
Spark jobs alone) and a broker node (:8081).
With ``--controller HOST:PORT`` it also runs an HA controller (SQLite file in the data dir) and the
broker joins it as a one-node group (docs/ha.md). A child that exits is started again after a backoff
(1 s, doubling); one that keeps exiting stops the stack. Ctrl-C or SIGTERM stops every child and
leaves nothing running.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from cli import output
from cli.config import AppEnvVars
from cli.supervisor import Supervisor

__all__ = ("ANALYTICS_QUEUE", "DEFAULT_QUEUE", "celery_workers", "standalone")

REPO_ROOT = Path(__file__).resolve().parents[2]
# The control plane's Celery queues (config/settings.py: CELERY_TASK_DEFAULT_QUEUE, MQ_ANALYTICS_QUEUE;
# the CLI does not import Django settings, a test keeps the two the same).
DEFAULT_QUEUE = "celery"
ANALYTICS_QUEUE = "analytics"
HEALTH_TIMEOUT_S = 60.0


class _Stop(Exception):
    """Raised from the signal handler to leave the watch loop."""


def _split(hostport: str) -> tuple[str, int]:
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise typer.BadParameter(f"expected HOST:PORT, got {hostport!r}")
    return host, int(port)


def celery_workers(python: str, data_dir: Path) -> list[tuple[str, list[str]]]:
    """The stack's Celery workers, (name, argv): one with beat for provisioning, reconcile and the
    minute checks (the default queue), and one for the nightly Spark jobs (:data:`ANALYTICS_QUEUE`),
    so a job that runs for minutes never holds the worker provisioning waits for."""
    celery = [python, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO"]
    return [
        (
            "celery",
            [*celery, "-Q", DEFAULT_QUEUE, "-B", "--schedule", str(data_dir / "celery" / "beat-schedule")],
        ),
        ("celery-analytics", [*celery, "-Q", ANALYTICS_QUEUE, "-n", f"{ANALYTICS_QUEUE}@%h"]),
    ]


def _broker_available() -> bool:
    return importlib.util.find_spec("dataplane.server") is not None


def standalone(
    data_dir: Annotated[
        Path,
        typer.Option(help="Where everything is kept.", envvar=AppEnvVars.DATA_DIR),
    ] = Path(".data"),
    http: Annotated[str, typer.Option(help="Control plane HOST:PORT.")] = "127.0.0.1:8000",
    broker: Annotated[str, typer.Option(help="Broker gRPC HOST:PORT.")] = "127.0.0.1:8081",
    metrics: Annotated[
        str, typer.Option(help="Broker Prometheus HOST:PORT ('' to disable).")
    ] = "127.0.0.1:5557",
    controller: Annotated[
        str,
        typer.Option(
            help="Also run an HA controller on this HOST:PORT (e.g. 127.0.0.1:9878) and make the "
            "broker a one-node group of it ('' for none)."
        ),
    ] = "",
    ha_listen: Annotated[
        str, typer.Option(help="Broker replication HOST:PORT (with --controller).")
    ] = "127.0.0.1:10912",
) -> None:
    """Run the control plane, Celery workers + beat and a broker until Ctrl-C."""
    http_host, http_port = _split(http)
    if controller:
        _split(controller)
        _split(ha_listen)
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        MQ_DATA_DIR=str(data_dir),
        DJANGO_SETTINGS_MODULE="config.settings",
        # Plain HTTP on loopback: cookies cannot be Secure and there is no TLS to redirect to.
        MQ_SECURE_COOKIES="0",
        MQ_SSL_REDIRECT="0",
        PYTHONUNBUFFERED="1",
    )
    env.setdefault("ALLOWED_HOSTS", f"localhost,127.0.0.1,[::1],{http_host}")
    # The broker's admin API needs the operator token; the control plane (and Celery) send it.
    env.setdefault("MQ_BROKER_ADMIN_TOKEN", _admin_token(data_dir))
    supervisor = Supervisor(data_dir / "logs", env, notify=output.warn)
    python = sys.executable
    base_url = f"http://{http_host}:{http_port}"
    with_broker = _broker_available()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        # A second Ctrl-C (or uv forwarding the same one) must not interrupt the orderly stop.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise _Stop

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        output.info("migrating the control-plane database ...")
        supervisor.run_once("migrate", [python, str(REPO_ROOT / "manage.py"), "migrate", "--noinput", "-v0"])

        supervisor.start(
            "control-plane",
            [
                python,
                "-m",
                "uvicorn",
                "config.asgi:application",
                "--host",
                http_host,
                "--port",
                str(http_port),
                "--lifespan",
                "off",
                "--no-access-log",
            ],
            cwd=REPO_ROOT,
        )
        for name, argv in celery_workers(python, data_dir):
            supervisor.start(name, argv, cwd=REPO_ROOT)
        if controller and with_broker:
            db = f"sqlite:///{data_dir / 'controller.db'}"
            supervisor.start(
                "controller",
                [python, "-m", "cli.main", "controller", "start", "--listen", controller, "--db", db],
                cwd=REPO_ROOT,
            )
            # The broker's replication key comes from its admin token (set above).
            supervisor.env.update(
                MQ_BROKER_CONTROLLER=controller,
                MQ_BROKER_HA_LISTEN=ha_listen,
                MQ_BROKER_HA_NODE=supervisor.env.get("MQ_BROKER_HA_NODE", "standalone-0"),
            )
        if with_broker:
            broker_argv = [
                python,
                "-m",
                "cli.main",
                "broker",
                "start",
                "--data-dir",
                str(data_dir / "broker"),
                "--listen",
                broker,
                "--metrics-listen",
                metrics or "0",
            ]
            supervisor.start("broker", broker_argv, cwd=REPO_ROOT)

        _wait_healthy(supervisor, f"{base_url}/api/v1/health")
        # After the stack is up, so the provisioning it queues reaches a running worker and broker.
        demo_args = [python, str(REPO_ROOT / "manage.py"), "bootstrap_demo", "--base-url", base_url]
        if with_broker:
            demo_args += ["--broker", broker]
            if metrics:
                demo_args += ["--broker-metrics", metrics]
        demo = json.loads(supervisor.run_once("bootstrap", demo_args).stdout.strip().splitlines()[-1])
        _print_banner(demo, data_dir, with_broker, controller if with_broker else "")
        while True:  # a child that exits is started again; one that keeps exiting stops the stack
            failing = supervisor.watch()
            if failing is not None:
                output.abort(
                    f"{failing.name} keeps exiting (code {failing.popen.returncode}, restarted "
                    f"{supervisor.max_restarts} times within {supervisor.restart_window_s:g} s); "
                    f"see {failing.log_path}"
                )
            time.sleep(0.5)
    except _Stop:
        output.info("stopping ...")
    except subprocess.CalledProcessError as exc:  # a failed setup step: show its output
        output.err_console.print(exc.stderr or "", markup=False, highlight=False)
        output.abort(f"setup step {exc.cmd[2:4]} failed with code {exc.returncode}")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        supervisor.stop_all()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    output.success("stopped; nothing left running")


def _admin_token(data_dir: Path) -> str:
    """The standalone broker's admin token, created once and kept (0600) in the data dir."""
    path = data_dir / "broker-admin-token"
    if path.exists():
        return path.read_text().strip()
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return token


def _wait_healthy(supervisor: Supervisor, url: str) -> None:
    import httpx  # deferred: 0.3 s of imports that mqctl --help should not pay

    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while time.monotonic() < deadline:
        exited = supervisor.first_exited()
        if exited is not None:
            output.abort(f"{exited.name} exited with code {exited.popen.returncode}; see {exited.log_path}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    output.abort(f"the control plane did not answer {url} within {HEALTH_TIMEOUT_S:.0f} s")


def _print_banner(demo: dict[str, object], data_dir: Path, with_broker: bool, controller: str = "") -> None:
    console = demo["console"]
    api = demo["api"]
    assert isinstance(console, dict) and isinstance(api, dict)
    lines = [
        "[bold]MQCloud standalone is up[/bold]",
        f"  console      {console['url']}   user [bold]{console['username']}[/bold]"
        f" password [bold]{console['password']}[/bold]",
        f"  admin        {demo['admin_url']}",
        f"  API          {api['url']}   token {api['token']}",
        f"  OpenAPI      {api['schema']}   (docs at /api/docs/)",
    ]
    broker = demo.get("broker")
    if with_broker and isinstance(broker, dict):
        lines.append(f"  broker       {broker['endpoint']}  (RocketMQ v2 gRPC)")
        if broker.get("admin_token"):  # its admin API is closed without it (not development mode)
            how = "mqctl admin --token, or MQ_BROKER_ADMIN_TOKEN"
            lines.append(f"               admin token {broker['admin_token']}  ({how})")
    if controller:
        lines.append(f"  controller   {controller}  (HA; the broker is a one-node group)")
    tenant = demo.get("tenant")
    if isinstance(tenant, dict):
        lines.append(
            f"  tenant       namespace {tenant.get('namespace')}"
            + (f", topic {tenant['topic']}, group {tenant['group']}" if tenant.get("topic") else "")
        )
        if tenant.get("access_key"):
            lines.append(
                f"               access key {tenant['access_key']} secret {tenant.get('secret_key')}"
            )
    lines += [
        f"  demo.json    {data_dir / 'demo.json'}",
        f"  logs         {data_dir / 'logs'}",
        "Ctrl-C stops everything.",
    ]
    for line in lines:
        output.console.print(line, highlight=False, soft_wrap=True)
