"""End to end: the API provisions a real broker process, and reconcile restores a broker rebuilt empty."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tenants.services.provisioning import reconcile_brokers, set_gateway
from tests.conftest import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _wait_admin(endpoint: str, timeout_s: float = 30.0) -> None:
    from mqcloud.admin_client import BrokerAdminClient, BrokerAdminError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with BrokerAdminClient(endpoint, timeout=1.0) as client:
                client.list_topics()
                return
        except BrokerAdminError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Broker:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.endpoint = f"127.0.0.1:{free_port()}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "cli.main",
            "broker",
            "start",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            self.endpoint,
            "--metrics-listen",
            "0",
        ]
        self.proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[3])
        _wait_admin(self.endpoint)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    pytest.importorskip("mqcloud.admin_client")
    b = Broker(tmp_path / "broker")
    b.start()
    yield b
    b.stop()


@pytest.fixture
def operator_client() -> APIClient:
    set_gateway(None)  # the real gRPC gateway
    from django.conf import settings

    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("op", is_staff=True))
    return client


def _topics(endpoint: str) -> dict[str, int]:
    from mqcloud.admin_client import BrokerAdminClient

    with BrokerAdminClient(endpoint) as client:
        return {
            t.name if "%" in t.name else f"{t.namespace}%{t.name}": t.queue_count
            for t in client.list_topics()
        }


def test_api_provisions_a_real_broker_and_reconcile_restores_it(
    broker: Broker, operator_client: APIClient
) -> None:
    api = operator_client
    # given: a registered broker and a tenant
    cluster = api.post(
        "/api/v1/broker-clusters/", {"name": "local", "is_default": True}, format="json"
    ).json()
    group = api.post(
        "/api/v1/broker-groups/", {"cluster": cluster["id"], "name": "broker-a"}, format="json"
    ).json()
    node = api.post(
        "/api/v1/broker-nodes/",
        {"group": group["id"], "name": "broker-a-0", "endpoint": broker.endpoint},
        format="json",
    )
    assert node.status_code == 201, node.content
    assert api.get(f"/api/v1/broker-nodes/{node.json()['id']}/").json()["health"] == "healthy"
    tenant = api.post("/api/v1/tenants/", {"name": "Acme", "namespace": "acme"}, format="json").json()
    # when: a topic and a group are created through the API
    topic = api.post(
        "/api/v1/topics/", {"tenant": tenant["id"], "name": "orders", "queue_count": 4}, format="json"
    )
    assert topic.status_code == 201, topic.content
    created = api.post("/api/v1/consumer-groups/", {"tenant": tenant["id"], "name": "billing"}, format="json")
    assert created.status_code == 201, created.content
    # then: the broker serves it and the API says so
    assert _topics(broker.endpoint).get("acme%orders") == 4
    assert api.get(f"/api/v1/topics/{topic.json()['id']}/").json()["status"] == "active"

    # when: the broker loses its configuration (rebuilt empty) and reconcile runs
    broker.stop()
    shutil.rmtree(broker.data_dir)
    broker.start()
    assert "acme%orders" not in _topics(broker.endpoint)
    report = reconcile_brokers()
    # then
    assert report.nodes_ok == 1
    assert _topics(broker.endpoint).get("acme%orders") == 4
    from mqcloud.admin_client import BrokerAdminClient

    with BrokerAdminClient(broker.endpoint) as client:
        assert "acme%billing" in {
            g.name if "%" in g.name else f"{g.namespace}%{g.name}" for g in client.list_groups()
        }

    # deleting through the API removes it from the broker
    assert api.delete(f"/api/v1/topics/{topic.json()['id']}/").status_code == 202
    assert "acme%orders" not in _topics(broker.endpoint)
    events = api.get("/api/v1/audit-events/?object_type=topic").json()
    assert {e["action"] for e in events["results"]} == {"create", "delete"}
