"""End to end (issue 6): tenant, access key, ACL, quota, topic and group through the REST API on a real
broker; our SDK sends and receives with the key; a broker rebuilt empty gets everything back."""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from mqcloud import ClientConfig, Credentials, Message, Producer, SimpleConsumer
from mqcloud.admin_client import BrokerAdminClient, quota_limits, secret_fingerprint
from tenants.services.provisioning import reconcile_brokers
from tests.integration.broker.conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _created(response: Any) -> dict[str, Any]:
    assert response.status_code == 201, response.content
    return dict(response.json())


def _broker_state(endpoint: str) -> dict[str, Any]:
    """What the broker holds for namespace acme, in comparable form."""
    with BrokerAdminClient(endpoint) as admin:
        return {
            "topics": {t.name: t.queue_count for t in admin.list_topics("acme")},
            "groups": {g.name for g in admin.list_groups("acme")},
            "keys": {
                k.access_key: (k.secret_fingerprint, k.namespace) for k in admin.list_access_keys("acme")
            },
            "acls": {
                p.name: (p.principal, p.resource_pattern, tuple(p.actions), p.decision)
                for p in admin.list_acls("acme")
            },
            "quotas": {(q.topic, q.group): quota_limits(q) for q in admin.list_quotas("acme")},
        }


def _send_and_receive(endpoint: str, access_key: str, secret: str, body: bytes) -> None:
    config = ClientConfig(endpoint, credentials=Credentials(access_key, secret), namespace="acme")
    with Producer(config, topics=["orders"]) as producer:
        receipt = producer.send(Message("orders", body, tag="created", keys=["order-1"]))
        assert receipt.message_id
    with SimpleConsumer(config, "billing", {"orders": "*"}, await_duration=2) as consumer:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for msg in consumer.receive(max_messages=16, invisible_duration=30):
                consumer.ack(msg)
                if msg.body == body:
                    assert (msg.topic, msg.tag, msg.keys) == ("orders", "created", ["order-1"])
                    return
        pytest.fail(f"{body!r} was not received within 30 s")


def test_api_provisions_keys_acls_quotas_and_the_sdk_works_and_reconcile_restores_all(
    broker: BrokerProcess, operator_client: APIClient
) -> None:
    api = operator_client
    # given: a registered broker
    cluster = _created(
        api.post("/api/v1/broker-clusters/", {"name": "local", "is_default": True}, format="json")
    )
    group = _created(
        api.post("/api/v1/broker-groups/", {"cluster": cluster["id"], "name": "broker-a"}, format="json")
    )
    _created(
        api.post(
            "/api/v1/broker-nodes/",
            {"group": group["id"], "name": "broker-a-0", "endpoint": broker.target},
            format="json",
        )
    )
    # when: a tenant and its key, topic, group, ACL and quotas are created through the API
    tenant = _created(api.post("/api/v1/tenants/", {"name": "Acme", "namespace": "acme"}, format="json"))
    key = _created(api.post("/api/v1/access-keys/", {"tenant": tenant["id"]}, format="json"))
    topic = _created(
        api.post(
            "/api/v1/topics/", {"tenant": tenant["id"], "name": "orders", "queue_count": 2}, format="json"
        )
    )
    _created(api.post("/api/v1/consumer-groups/", {"tenant": tenant["id"], "name": "billing"}, format="json"))
    policy = _created(
        api.post(
            "/api/v1/acl-policies/",
            {
                "tenant": tenant["id"],
                "principal": key["access_key"],
                "resource_type": "Topic",
                "resource_pattern": "LITERAL",
                "resource_name": "orders",
                "actions": ["Pub", "Sub"],
                "decision": "Allow",
            },
            format="json",
        )
    )
    _created(
        api.post("/api/v1/quotas/", {"tenant": tenant["id"], "produce_messages_per_s": 500}, format="json")
    )
    _created(
        api.post(
            "/api/v1/quotas/",
            {"tenant": tenant["id"], "topic": topic["id"], "consume_bytes_per_s": 4096},
            format="json",
        )
    )
    # then: the broker holds them all, and the API says they are active
    state = _broker_state(broker.target)
    assert state["topics"] == {"acme%orders": 2}
    assert state["groups"] == {"acme%billing"}
    # brokers list a fingerprint, never the secret
    assert state["keys"] == {
        key["access_key"]: (secret_fingerprint(key["access_key"], key["secret_key"]), "acme")
    }
    assert list(state["acls"]) == [str(policy["id"])]
    assert state["acls"][str(policy["id"])][:2] == (key["access_key"], "orders")
    assert state["quotas"][("", "")]["produce_messages_per_s"] == 500
    assert state["quotas"][("acme%orders", "")] == {"consume_bytes_per_s": 4096}
    for path in ("access-keys", "acl-policies", "quotas", "topics", "consumer-groups"):
        rows = api.get(f"/api/v1/{path}/").json()["results"]
        assert {r["status"] for r in rows} == {"active"}, (path, rows)

    # and: our SDK sends to the topic and receives + acks with the tenant's key
    _send_and_receive(broker.target, key["access_key"], key["secret_key"], b"first")

    # when: the broker loses its whole data dir and reconcile runs
    broker.stop()
    shutil.rmtree(broker.data_dir)
    broker.start()
    assert _broker_state(broker.target)["keys"] == {}
    report = reconcile_brokers()
    # then: topic, group, key (with its secret), ACL and quotas are all back
    assert report.nodes_ok == 1 and report.nodes_unreachable == 0
    assert _broker_state(broker.target) == state
    _send_and_receive(broker.target, key["access_key"], key["secret_key"], b"after-rebuild")

    # revoking the key removes it from the broker
    assert api.post(f"/api/v1/access-keys/{key['id']}/revoke/").status_code == 200
    assert _broker_state(broker.target)["keys"] == {}
