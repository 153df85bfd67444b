"""``make cluster-up``: the production topology on loopback serves a tenant end to end, its
scheduled reconcile (Celery beat, a worker over Redis) repairs a broker, and ``make cluster-down``
leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mqcloud import ClientConfig, Credentials, Message, Producer, SimpleConsumer
from mqcloud.admin_client import BrokerAdminClient
from tests.conftest import worker_port_range

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "cluster_local.py"
MARKER = "MQCLOUD_LOCAL_CLUSTER"
RECONCILE_INTERVAL_S = 5
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]


def cluster_processes(state_dir: Path) -> list[int]:
    """Live (non-zombie) PIDs whose environment carries this cluster's marker."""
    needle = f"{MARKER}={state_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X"):
                continue
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        found.append(int(entry.name))
    return found


def run_script(action: str, state_dir: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    # The cluster brings its own PostgreSQL and Redis: nothing from the test run leaks in.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    # its nodes take ports from this worker's slice, not from the ones other workers hand out
    env["MQCLOUD_PORT_RANGE"] = "{}-{}".format(*worker_port_range())
    # beat's periodic reconcile every few seconds, so the test sees it repair a broker
    env["MQ_RECONCILE_INTERVAL_S"] = str(RECONCILE_INTERVAL_S)
    env["MQ_ANALYTICS_NIGHTLY_AT"] = "off"  # no Spark jobs' load at 02:30 UTC
    return subprocess.run(
        [sys.executable, str(SCRIPT), action, "--state-dir", str(state_dir)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, dict[str, object]]]:
    state_dir = (tmp_path / "cluster").resolve()
    up = run_script("up", state_dir, timeout=240)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        yield state_dir, json.loads((state_dir / "cluster.json").read_text())
    finally:
        if up.returncode != 0 or not (state_dir / "cluster.json").exists():
            for log in sorted((state_dir / "logs").glob("*.log")):
                print(f"== {log.name}\n{log.read_text()[-2000:]}")
        run_script("down", state_dir, timeout=120)
        for pid in cluster_processes(state_dir):  # never leak a cluster, even on failure
            os.kill(pid, signal.SIGKILL)


def wait_active(http: httpx.Client, path: str, timeout: float = 90) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        row = http.get(path).json()
        if row["status"] == "active":
            return dict(row)
        assert time.monotonic() < deadline, f"{path} never became active: {row}"
        time.sleep(0.5)


def wait_logged(log: Path, start: int, *parts: str) -> str:
    """The first line of ``log`` past byte ``start`` that holds every one of ``parts`` (a few
    periodic passes at most); fails printing the worker's and beat's logs."""
    deadline = time.monotonic() + 24 * RECONCILE_INTERVAL_S
    while time.monotonic() < deadline:
        for line in log.read_bytes()[start:].decode(errors="replace").splitlines():
            if all(part in line for part in parts):
                return line
        time.sleep(0.5)
    print(
        f"== {log.name} from the wait on\n{log.read_bytes()[start : start + 20000].decode(errors='replace')}"
    )
    print(f"== celery-beat.log\n{log.with_name('celery-beat.log').read_text()[-2000:]}")
    pytest.fail(f"no line with {parts} in {log.name}")


def test_cluster_up_serves_a_tenant_through_both_groups_and_down_leaves_nothing(
    cluster: tuple[Path, dict[str, object]],
) -> None:
    state_dir, state = cluster
    groups = state["broker_groups"]
    assert isinstance(groups, dict) and len(groups) == 2
    assert all(len(nodes) == 3 for nodes in groups.values())
    # the nodes' ports come from this worker's slice (no race with ports other workers hand out)
    low, high = worker_port_range()
    ports = [
        int(str(node[key]).rpartition(":")[2])
        for nodes in groups.values()
        for node in nodes
        for key in ("endpoint", "metrics")
    ]
    assert all(low <= port <= high for port in ports), (ports, low, high)
    # given: every part runs as its own process, found by the marker the script sets
    names = {p.name.split("-", 1)[1].removesuffix(".pid") for p in (state_dir / "pids").glob("*.pid")}
    assert {
        "postgres",
        "redis",
        "s3",
        "control-plane",
        "celery-worker",
        "celery-analytics",
        "celery-beat",
    } <= names
    assert {"controller-0", "controller-1"} <= names
    assert {f"broker-{g}-{n}" for g in "ab" for n in range(3)} <= names
    assert len(cluster_processes(state_dir)) >= 14
    # the control plane is gunicorn with uvicorn workers, on PostgreSQL
    api = str(state["api"])
    assert httpx.get(f"{api}/api/v1/health").json() == {"status": "ok", "database": "postgresql"}
    token = state["operator"]["token"]  # type: ignore[index]

    with httpx.Client(base_url=api, headers={"Authorization": f"Token {token}"}, timeout=30) as http:
        # when: a tenant, an access key, a topic and a group are provisioned through the REST API
        tenant = http.post("/api/v1/tenants/", json={"name": "Acme", "namespace": "acme"})
        assert tenant.status_code == 201, tenant.text
        tenant_id = tenant.json()["id"]
        key = http.post("/api/v1/access-keys/", json={"tenant": tenant_id, "description": "ci"})
        assert key.status_code == 201, key.text
        topic = http.post("/api/v1/topics/", json={"tenant": tenant_id, "name": "orders", "queue_count": 4})
        assert topic.status_code == 201, topic.text
        group = http.post("/api/v1/consumer-groups/", json={"tenant": tenant_id, "name": "billing"})
        assert group.status_code == 201, group.text
        # then: Celery (over Redis) pushes them to every broker group
        wait_active(http, f"/api/v1/access-keys/{key.json()['id']}/")
        wait_active(http, f"/api/v1/topics/{topic.json()['id']}/")
        wait_active(http, f"/api/v1/consumer-groups/{group.json()['id']}/")

    # and: the SDK sends and receives through each broker group with the tenant's key
    credentials = Credentials(key.json()["access_key"], key.json()["secret_key"])
    for group_name, nodes in groups.items():
        config = ClientConfig(nodes[0]["endpoint"], credentials=credentials, namespace="acme")
        sent = {f"{group_name}-{i}".encode() for i in range(10)}
        with Producer(config, topics=["orders"]) as producer:
            for body in sorted(sent):
                producer.send(Message("orders", body, tag="t"))
        received: set[bytes] = set()
        deadline = time.monotonic() + 60
        with SimpleConsumer(config, "billing", {"orders": "*"}, await_duration=2) as consumer:
            while received != sent and time.monotonic() < deadline:
                for message in consumer.receive(16, 30):
                    received.add(message.body)
                    consumer.ack(message)
        assert received == sent, f"{group_name}: missing {sorted(sent - received)}"

    # when: a broker loses the topic behind the control plane's back (an operator's mistake, a node
    # rebuilt from an old disk), after a periodic pass ran: the reconciles the nodes' registration
    # queued are done by then, so only the next periodic pass can put the topic back
    node = next(iter(groups.values()))[1]
    worker_log = Path(str(state["logs"])) / "celery-worker.log"
    wait_logged(worker_log, worker_log.stat().st_size, "reconcile: ")
    with BrokerAdminClient(str(node["endpoint"]), token=str(state["admin_token"]) or None) as admin:
        placed = admin.get_topic("acme%orders").queue_count  # this group's share of the 4 queues
        deleted_at = worker_log.stat().st_size  # a pass may repair it at once: read from here
        admin.delete_topic("acme%orders")
        # then: Celery beat's periodic reconcile, run by the worker over Redis, puts it back
        wait_logged(worker_log, deleted_at, "reconcile: ", "repaired: ", f"{node['name']}:topic:acme%orders")
        assert admin.get_topic("acme%orders").queue_count == placed

    # when: cluster-down
    started = time.monotonic()
    down = run_script("down", state_dir, timeout=120)
    # then: it stops everything, quickly, and removes the state dir
    assert down.returncode == 0, down.stderr
    assert cluster_processes(state_dir) == []
    assert not state_dir.exists()
    assert time.monotonic() - started < 60
