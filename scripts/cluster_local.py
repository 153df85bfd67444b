"""The production topology as real processes on loopback: ``make cluster-up`` / ``make cluster-down``.

``up`` starts, each on a free port and configured only through what a real deployment uses (the
``cluster.env`` environment file and one TOML file per broker, written into the state dir):
PostgreSQL (a throwaway cluster, or ``DATABASE_URL``), Redis (``redis-server``, or
``CELERY_BROKER_URL``), an S3 protocol server (moto) holding the tiered-storage bucket, two HA
controllers sharing the PostgreSQL cluster, two broker groups of three nodes (controller mode,
tiered storage, signed requests and an admin token), the control plane under gunicorn, a Celery
worker and Celery beat. It then does what an operator does once: migrate, create
the operator account and its API token, and register the broker groups through the REST API.
Endpoints and the token go to ``<state dir>/cluster.json``.

Every long-running process runs in its own session with its PID in ``<state dir>/pids/``; ``down``
signals each process group by PID (SIGTERM, then SIGKILL) and leaves nothing running.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx

from cli.commands.standalone import ANALYTICS_QUEUE, DEFAULT_QUEUE

__all__ = ("Topology", "cluster_down", "cluster_up", "main")

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Every process of one local cluster carries this variable, so a test (or you) can find them all.
MARKER = "MQCLOUD_LOCAL_CLUSTER"
OPERATOR = "operator"
TIER_BUCKET = "mqcloud-tier"
STOP_TIMEOUT_S = 20.0
# Small CommitLog segments: each is zero-filled on creation, 1 GiB per node would fill a laptop disk.
SEGMENT_BYTES = 16 << 20


@dataclass(slots=True)
class Topology:
    """How many of each part to run; the production shape by default."""

    groups: tuple[str, ...] = ("broker-a", "broker-b")
    nodes_per_group: int = 3
    controllers: int = 2
    # Copies (master included) that hold a message before SEND_OK: survives one node down.
    min_in_sync_replicas: int = 2
    web_workers: int = 2
    celery_concurrency: int = 2
    segment_bytes: int = SEGMENT_BYTES
    # More [broker] settings for every node's TOML file (the soak offloads to S3 within minutes).
    broker_settings: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class Cluster:
    """The state dir and what has been started in it."""

    root: Path
    endpoints: dict[str, object] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)

    @property
    def pid_dir(self) -> Path:
        return self.root / "pids"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def base_env(self) -> dict[str, str]:
        """A clean environment: nothing leaks in from the caller's shell but the basics."""
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.update({MARKER: str(self.root), "PYTHONUNBUFFERED": "1"})
        return env

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> int:
        """Start a long-running process in its own session; its PID goes to ``pids/<name>.pid``."""
        with open(self.log_dir / f"{name}.log", "ab") as log:
            popen = subprocess.Popen(
                list(argv),
                cwd=REPO,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.record(name, popen.pid)
        return popen.pid

    def record(self, name: str, pid: int) -> None:
        (self.pid_dir / f"{len(self.started):02d}-{name}.pid").write_text(f"{pid}\n")
        self.started.append(name)

    def run_once(self, name: str, argv: Sequence[str], env: Mapping[str, str], tolerate: str = "\0") -> str:
        """A setup step (migrate, createsuperuser): runs to completion, output kept in its log.

        A failure whose stderr contains ``tolerate`` (an account that already exists) is fine.
        """
        done = subprocess.run(
            list(argv), cwd=REPO, env=dict(env), capture_output=True, text=True, timeout=300, check=False
        )
        (self.log_dir / f"{name}.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0 and tolerate not in done.stderr:
            raise SystemExit(f"cluster-up: {name} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        return done.stdout


#
# Parts
#


def port_range() -> tuple[int, int]:
    """Where :func:`free_port` draws from: ``MQCLOUD_PORT_RANGE`` ("LOW-HIGH"), else 10000-32000,
    below the ephemeral range. A test runner gives each of its workers a slice of its own."""
    text = os.environ.get("MQCLOUD_PORT_RANGE", "10000-32000")
    try:
        low, high = (int(part) for part in text.split("-"))
    except ValueError:
        raise SystemExit(f"MQCLOUD_PORT_RANGE: expected LOW-HIGH, found {text!r}") from None
    if not 1024 <= low <= high <= 65535:
        raise SystemExit(f"MQCLOUD_PORT_RANGE: {text!r} is not a range within 1024-65535")
    return low, high


# Ports this run has handed out: a port is free when drawn but bound only when its process starts,
# so without this two parts of one cluster could draw the same port (one then fails to bind).
_handed_out: set[int] = set()


def free_port() -> int:
    """A free port below the ephemeral range, so no outgoing connection takes it before a node that
    restarts on it binds again; never one this run handed out before."""
    low, high = port_range()
    for _ in range(1000):
        port = random.randint(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{high}")


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, httpx.HTTPError):
            pass
        time.sleep(0.25)
    raise SystemExit(f"cluster-up: {what} did not come up within {timeout:.0f} s")


def port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def _apt_install(package: str) -> None:
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    print(f"cluster-up: installing Debian's {package}", file=sys.stderr)
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True)
    subprocess.run(
        [*sudo, "apt-get", "install", "-y", "-qq", package],
        check=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        stdout=subprocess.DEVNULL,
    )


def _pg_bindir() -> Path:
    for candidate in (shutil.which("pg_config"),):
        if candidate:
            bindir = Path(subprocess.check_output([candidate, "--bindir"], text=True).strip())
            if (bindir / "initdb").exists():
                return bindir
    for bindir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (bindir / "initdb").exists():
            return bindir
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    _apt_install("postgresql")
    return _pg_bindir()


def start_postgres(cluster: Cluster) -> str:
    """A throwaway PostgreSQL cluster; its postmaster PID is recorded, its directory noted.

    The cluster lives in its own directory under /tmp: when we are root it runs as the postgres
    account (initdb refuses root), which may not be able to enter the state dir.
    """
    bindir = _pg_bindir()
    home = Path(tempfile.mkdtemp(prefix="mqcloud-cluster-pg."))
    (cluster.root / "postgres.dir").write_text(str(home))
    home.chmod(0o755)
    data = home / "data"
    as_pg: list[str] = []
    if os.geteuid() == 0:
        as_pg = ["runuser", "-u", "postgres", "--"]
        shutil.chown(home, "postgres")
    port = free_port()
    env = cluster.base_env()
    cluster.run_once(
        "postgres-initdb",
        [*as_pg, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync"],
        env,
    )
    options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c max_connections=200"
    pg_ctl = [*as_pg, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(home / "server.log")]
    cluster.run_once("postgres-start", [*pg_ctl, "-w", "-t", "60", "-o", options, "start"], env)
    cluster.record("postgres", int((data / "postmaster.pid").read_text().split()[0]))
    return f"postgres://postgres@127.0.0.1:{port}/postgres"


def start_redis(cluster: Cluster) -> str:
    if shutil.which("redis-server") is None:
        _apt_install("redis-server")
    port = free_port()
    (cluster.root / "redis").mkdir()
    # A queue, not a store of record: no snapshots, no append-only file.
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    cluster.spawn("redis", [*argv, "--dir", str(cluster.root / "redis")], cluster.base_env())
    wait_for("redis", lambda: port_open(port))
    return f"redis://127.0.0.1:{port}/0"


def start_s3(cluster: Cluster) -> str:
    port = free_port()
    cluster.spawn("s3", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], cluster.base_env())
    url = f"http://127.0.0.1:{port}"
    wait_for("the S3 server", lambda: httpx.get(url, timeout=2).status_code < 500)
    httpx.put(f"{url}/{TIER_BUCKET}", timeout=10).raise_for_status()  # what `aws s3 mb` does
    return url


def start_controllers(cluster: Cluster, topology: Topology, database_url: str) -> str:
    """HA controllers sharing the PostgreSQL cluster (own tables); exactly one holds the lease."""
    addresses = []
    for index in range(topology.controllers):
        listen = f"127.0.0.1:{free_port()}"
        values = {"MQ_CONTROLLER_LISTEN": listen, "MQ_CONTROLLER_DB": database_url}
        env_file = cluster.root / "config" / f"controller-{index}.env"
        env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        env = {**cluster.base_env(), **read_env_file(env_file)}
        cluster.spawn(f"controller-{index}", [str(BIN / "mqctl"), "controller", "start"], env)
        addresses.append(listen)
        # One at a time: two controllers creating their tables at once collide in PostgreSQL's
        # catalog (CREATE TABLE IF NOT EXISTS is not atomic there).
        wait_for(f"controller {listen}", partial(port_open, int(listen.rpartition(":")[2])))
    return ",".join(addresses)


def broker_secrets(cluster: Cluster, admin_token: str) -> dict[str, str]:
    """``broker.env`` (mode 0600): what brokers must not read from a world-readable config file."""
    values = {"MQ_BROKER_ADMIN_TOKEN": admin_token, "MQ_BROKER_TIER_SECRET_ACCESS_KEY": "local"}
    path = cluster.root / "config" / "broker.env"
    path.touch(mode=0o600)
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return read_env_file(path)


def wait_for_masters(brokers: Mapping[str, list[dict[str, str]]], admin_token: str, copies: int) -> None:
    """Each group has a writable master with ``copies`` nodes in its SyncStateSet."""
    import grpc

    from mqcloud.admin.v1 import cluster_pb2, cluster_pb2_grpc

    def ready(endpoint: str) -> bool:
        with grpc.insecure_channel(endpoint) as channel:
            stub = cluster_pb2_grpc.ClusterAdminStub(channel)
            try:
                node = stub.GetClusterStatus(
                    cluster_pb2.GetClusterStatusRequest(),
                    metadata=[("authorization", f"Bearer {admin_token}")],
                    timeout=2,
                ).node
            except grpc.RpcError:
                return False
        return node.role == "MASTER" and node.writable and len(node.sync_state_set) >= copies

    def group_ready(members: list[dict[str, str]]) -> bool:
        return any(ready(member["endpoint"]) for member in members)

    for group, members in brokers.items():
        wait_for(f"a master for {group}", partial(group_ready, members), 90)


def write_broker_config(
    cluster: Cluster, topology: Topology, group: str, node: int, controllers: str = "", s3_url: str = ""
) -> Path:
    """One broker's TOML file: the same ``--config`` file a host or a ConfigMap would hold.

    Secrets (the admin token, the object-store key) are not in it: they come from ``broker.env``.
    """
    name = f"{group}-{node}"
    port, metrics, replication = free_port(), free_port(), free_port()
    settings: dict[str, object] = {
        "data_dir": str(cluster.root / "brokers" / name),
        "listen": f"127.0.0.1:{port}",
        "broker_name": group,
        "metrics_listen": f"127.0.0.1:{metrics}",
        "flush": "async",
        "commit_log_segment_bytes": topology.segment_bytes,
    }
    if controllers:
        settings |= {
            "controller": controllers,
            "ha_node": name,
            "ha_listen": f"127.0.0.1:{replication}",
            "min_in_sync_replicas": topology.min_in_sync_replicas,
        }
    if s3_url:
        settings |= {
            "tier_enabled": True,
            "tier_url": f"s3://{TIER_BUCKET}/{group}",
            "tier_endpoint": s3_url,
            "tier_region": "us-east-1",
            "tier_access_key_id": "local",
        }
    settings |= topology.broker_settings
    path = cluster.root / "config" / f"{name}.toml"
    lines = ["[broker]"] + [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def control_plane_env(
    cluster: Cluster, database_url: str, celery_url: str, http_port: int, admin_token: str = ""
) -> Path:
    """``cluster.env``: the environment file every control-plane process reads (systemd style)."""
    values = {
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": celery_url,
        "SECRET_KEY": base64.urlsafe_b64encode(os.urandom(48)).decode(),
        "MQ_SECRETS_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "MQ_DATA_DIR": str(cluster.root / "control-plane"),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "MQ_HTTP_LISTEN": f"127.0.0.1:{http_port}",
        # Plain HTTP on loopback; a real deployment terminates TLS in front and keeps both on.
        "MQ_SSL_REDIRECT": "0",
        "MQ_SECURE_COOKIES": "0",
        # beat's repair interval; a test may ask for a shorter one to see a repair happen
        "MQ_RECONCILE_INTERVAL_S": os.environ.get("MQ_RECONCILE_INTERVAL_S", "30"),
        "MQ_ANALYTICS_NIGHTLY_AT": os.environ.get("MQ_ANALYTICS_NIGHTLY_AT", "02:30"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    if admin_token:  # the brokers' operator credential, for provisioning
        values["MQ_BROKER_ADMIN_TOKEN"] = admin_token
    path = cluster.root / "cluster.env"
    path.touch(mode=0o600)
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def read_env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.lstrip().startswith("#")}


def register_brokers(api: str, token: str, brokers: Mapping[str, list[dict[str, str]]]) -> None:
    """What an operator does once per broker group: register it with the control plane."""
    with httpx.Client(base_url=api, headers={"Authorization": f"Token {token}"}, timeout=30) as http:
        cluster = http.post("/api/v1/broker-clusters/", json={"name": "local", "is_default": True})
        cluster.raise_for_status()
        for group_name, nodes in brokers.items():
            group = http.post(
                "/api/v1/broker-groups/", json={"cluster": cluster.json()["id"], "name": group_name}
            )
            group.raise_for_status()
            for broker_id, node in enumerate(nodes):
                created = http.post(
                    "/api/v1/broker-nodes/",
                    json={
                        "group": group.json()["id"],
                        "name": node["name"],
                        "broker_id": broker_id,
                        "endpoint": node["endpoint"],
                        "metrics_endpoint": node["metrics"],
                    },
                )
                created.raise_for_status()


#
# up / down
#


def cluster_up(root: Path, topology: Topology) -> dict[str, object]:
    """Start every part; on any failure stop what was started and re-raise."""
    root = root.resolve()
    if root.exists():
        if live_pids(root):
            raise SystemExit(f"cluster-up: a cluster is already running in {root}; run cluster-down first")
        cluster_down(root)  # what an earlier failed or kept run left
    cluster = Cluster(root)
    for sub in ("pids", "logs", "config", "brokers", "control-plane"):
        (root / sub).mkdir(parents=True)
    try:
        return _up(cluster, topology)
    except BaseException:
        cluster_down(root, keep=True)
        raise


def _up(cluster: Cluster, topology: Topology) -> dict[str, object]:
    database_url = os.environ.get("DATABASE_URL") or start_postgres(cluster)
    celery_url = os.environ.get("CELERY_BROKER_URL") or start_redis(cluster)
    s3_url = start_s3(cluster)
    controllers = start_controllers(cluster, topology, database_url) if topology.controllers else ""
    admin_token = base64.urlsafe_b64encode(os.urandom(24)).decode()
    broker_env = {**cluster.base_env(), **broker_secrets(cluster, admin_token)}

    brokers: dict[str, list[dict[str, str]]] = {}
    for group in topology.groups:
        for node in range(topology.nodes_per_group):
            config = write_broker_config(cluster, topology, group, node, controllers, s3_url)
            settings = _toml_broker(config)
            cluster.spawn(
                f"{group}-{node}",
                [str(BIN / "mqctl"), "broker", "start", "--config", str(config)],
                broker_env,
            )
            brokers.setdefault(group, []).append(
                {
                    "name": f"{group}-{node}",
                    "endpoint": settings["listen"],
                    "metrics": settings["metrics_listen"],
                }
            )

    http_port = free_port()
    env_file = control_plane_env(cluster, database_url, celery_url, http_port, admin_token)
    env = {**cluster.base_env(), **read_env_file(env_file), "WEB_CONCURRENCY": str(topology.web_workers)}
    manage = [str(BIN / "python"), str(REPO / "manage.py")]
    cluster.run_once("migrate", [*manage, "migrate", "--noinput", "-v0"], env)
    password = base64.urlsafe_b64encode(os.urandom(12)).decode()
    superuser_env = {**env, "DJANGO_SUPERUSER_PASSWORD": password, "DJANGO_SUPERUSER_EMAIL": "op@localhost"}
    # An existing account (DATABASE_URL naming a database that has one) keeps its password.
    cluster.run_once(
        "createsuperuser",
        [*manage, "createsuperuser", "--noinput", "--username", OPERATOR],
        superuser_env,
        tolerate="already taken",
    )
    token = cluster.run_once("create-token", [*manage, "drf_create_token", OPERATOR], env).split()[2]

    cluster.spawn(
        "control-plane",
        [str(BIN / "gunicorn"), "-c", "python:config.gunicorn", "config.asgi:application"],
        env,
    )
    celery = [str(BIN / "celery"), "-A", "config"]
    worker = [*celery, "worker", "--loglevel", "INFO"]
    slots = str(topology.celery_concurrency)
    cluster.spawn("celery-worker", [*worker, "-Q", DEFAULT_QUEUE, "--concurrency", slots], env)
    # the nightly Spark jobs' own worker: a job holds its slot for minutes, none of provisioning's
    analytics = [*worker, "-Q", ANALYTICS_QUEUE, "-n", f"{ANALYTICS_QUEUE}@%h", "--concurrency", "1"]
    cluster.spawn("celery-analytics", analytics, env)
    cluster.spawn("celery-beat", [*celery, "beat", "--loglevel", "INFO"], env)

    api = f"http://127.0.0.1:{http_port}"
    wait_for("the control plane", lambda: httpx.get(f"{api}/api/v1/health", timeout=2).status_code == 200)
    for members in brokers.values():
        for member in members:
            port = int(member["endpoint"].rpartition(":")[2])
            wait_for(f"broker {member['name']}", partial(port_open, port))
    if controllers:
        wait_for_masters(brokers, admin_token, min(topology.nodes_per_group, topology.min_in_sync_replicas))
    register_brokers(api, token, brokers)

    state: dict[str, object] = {
        "api": api,
        "operator": {"username": OPERATOR, "password": password, "token": token},
        "broker_groups": brokers,
        "database_url": database_url,
        "celery_broker_url": celery_url,
        "s3_endpoint": s3_url,
        "controllers": controllers,
        "admin_token": admin_token,
        "env_file": str(env_file),
        "logs": str(cluster.log_dir),
    }
    path = cluster.root / "cluster.json"
    path.touch(mode=0o600)
    path.write_text(json.dumps(state, indent=2))
    return state


def _toml_broker(path: Path) -> dict[str, str]:
    return {k: str(v) for k, v in tomllib.loads(path.read_text())["broker"].items()}


def _alive(pid: int) -> bool:
    """Running and not a zombie (an orphan nobody reaped yet is already dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def live_pids(root: Path) -> list[int]:
    pid_dir = root.resolve() / "pids"
    if not pid_dir.is_dir():
        return []
    pids = (int(p.read_text().strip()) for p in sorted(pid_dir.glob("*.pid")))
    return [pid for pid in pids if _alive(pid)]


def wait_gone(pid: int, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for ``pid`` to exit; whether it did."""
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def _signal(pid: int, sig: signal.Signals) -> None:
    """The process group first (it holds gunicorn/celery children), then the PID itself."""
    for send in (os.killpg, os.kill):
        try:
            send(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def cluster_down(root: Path, keep: bool = False) -> list[int]:
    """Stop every recorded process, last started first; remove the state dir unless ``keep``.

    Returns the PIDs still alive afterwards (none, unless one is beyond our permission to kill).
    """
    root = root.resolve()
    pid_files = sorted((root / "pids").glob("*.pid"), reverse=True) if root.is_dir() else []
    for pid_file in pid_files:
        pid = int(pid_file.read_text().strip())
        # PostgreSQL's fast shutdown is SIGINT; everyone else stops cleanly on SIGTERM.
        _signal(pid, signal.SIGINT if pid_file.stem.endswith("-postgres") else signal.SIGTERM)
        if not wait_gone(pid, STOP_TIMEOUT_S):
            _signal(pid, signal.SIGKILL)
    left = live_pids(root)
    pg_home = root / "postgres.dir"
    if not keep and pg_home.exists():
        shutil.rmtree(pg_home.read_text().strip(), ignore_errors=True)
    if not keep and root.is_dir():
        shutil.rmtree(root)
    return left


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--state-dir", type=Path, default=REPO / ".cluster")
    parser.add_argument("--keep", action="store_true", help="down: keep the state dir (logs, data)")
    args = parser.parse_args(argv)
    if args.action == "up":
        state = cluster_up(args.state_dir, Topology())
        print(json.dumps(state, indent=2))
    elif args.action == "down":
        left = cluster_down(args.state_dir, keep=args.keep)
        print(f"cluster-down: stopped; {len(left)} processes left {left or ''}", file=sys.stderr)
        if left:
            raise SystemExit(1)
    else:
        print(json.dumps({"running": live_pids(args.state_dir)}))


if __name__ == "__main__":
    main()
