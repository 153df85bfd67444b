"""End to end: the API provisions a real broker process, and reconcile restores a broker rebuilt empty."""

from __future__ import annotations

import shutil

import pytest
from rest_framework.test import APIClient

from tenants.services.provisioning import reconcile_brokers
from tests.integration.broker.conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _topics(endpoint: str) -> dict[str, int]:
    from mqcloud.admin_client import BrokerAdminClient

    with BrokerAdminClient(endpoint) as client:
        return {
            t.name if "%" in t.name else f"{t.namespace}%{t.name}": t.queue_count
            for t in client.list_topics()
        }


def test_api_provisions_a_real_broker_and_reconcile_restores_it(
    broker: BrokerProcess, operator_client: APIClient
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
        {"group": group["id"], "name": "broker-a-0", "endpoint": broker.target},
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
    assert _topics(broker.target).get("acme%orders") == 4
    assert api.get(f"/api/v1/topics/{topic.json()['id']}/").json()["status"] == "active"

    # when: the broker loses its configuration (rebuilt empty) and reconcile runs
    broker.stop()
    shutil.rmtree(broker.data_dir)
    broker.start()
    assert "acme%orders" not in _topics(broker.target)
    report = reconcile_brokers()
    # then
    assert report.nodes_ok == 1
    assert _topics(broker.target).get("acme%orders") == 4
    from mqcloud.admin_client import BrokerAdminClient

    with BrokerAdminClient(broker.target) as client:
        assert "acme%billing" in {
            g.name if "%" in g.name else f"{g.namespace}%{g.name}" for g in client.list_groups()
        }

    # deleting through the API removes it from the broker
    assert api.delete(f"/api/v1/topics/{topic.json()['id']}/").status_code == 202
    assert "acme%orders" not in _topics(broker.target)
    events = api.get("/api/v1/audit-events/?object_type=topic").json()
    assert {e["action"] for e in events["results"]} == {"create", "delete"}
