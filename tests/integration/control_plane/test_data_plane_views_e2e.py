"""End to end: the data-plane views of the REST API over a real broker process."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _ok(response: Any, code: int = 200) -> Any:
    assert response.status_code == code, response.content
    return response.json()


def _wait(check: Any, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_views_over_a_real_broker(broker: BrokerProcess, operator_client: APIClient) -> None:
    api = operator_client
    # given: a broker, a tenant, a topic and a group (max 1 delivery: a failure goes to the DLQ)
    cluster = _ok(
        api.post("/api/v1/broker-clusters/", {"name": "local", "is_default": True}, format="json"), 201
    )
    group = _ok(
        api.post("/api/v1/broker-groups/", {"cluster": cluster["id"], "name": "broker-a"}, format="json"), 201
    )
    _ok(
        api.post(
            "/api/v1/broker-nodes/",
            {"group": group["id"], "name": "broker-a-0", "endpoint": broker.target},
            format="json",
        ),
        201,
    )
    tenant = _ok(api.post("/api/v1/tenants/", {"name": "Acme", "namespace": "acme"}, format="json"), 201)
    topic = _ok(
        api.post(
            "/api/v1/topics/", {"tenant": tenant["id"], "name": "orders", "queue_count": 1}, format="json"
        ),
        201,
    )
    cg = _ok(
        api.post(
            "/api/v1/consumer-groups/",
            {"tenant": tenant["id"], "name": "billing", "max_delivery_attempts": 1},
            format="json",
        ),
        201,
    )
    t, g = f"/api/v1/topics/{topic['id']}", f"/api/v1/consumer-groups/{cg['id']}"

    # when: two test messages are sent through the API
    first = _ok(
        api.post(f"{t}/messages/", {"body": "one", "keys": ["k-1"], "properties": {"a": "1"}}, format="json"),
        201,
    )
    second = _ok(
        api.post(f"{t}/messages/", {"body_base64": base64.b64encode(b"two").decode()}, format="json"), 201
    )
    assert (first["broker"], first["queue_id"], first["queue_offset"]) == ("broker-a", 0, 0)
    assert second["queue_offset"] == 1

    # then: stats, queries and traces see them
    stats = _ok(api.get(f"{t}/stats/"))
    assert stats["messages_total"] == 2 and stats["queues"][0]["last_store_time"].endswith("Z")
    [by_key] = _ok(api.get(f"{t}/messages/?key=k-1"))["results"]
    assert (by_key["message_id"], base64.b64decode(by_key["body_base64"]), by_key["properties"]) == (
        first["message_id"],
        b"one",
        {"a": "1"},
    )
    by_queue = _ok(api.get(f"{t}/messages/?queue_id=0&offset=0"))["results"]
    assert [m["message_id"] for m in by_queue] == [first["message_id"], second["message_id"]]
    by_time = _ok(api.get(f"{t}/messages/?begin={stats['queues'][0]['last_store_time']}"))["results"]
    assert by_time[-1]["message_id"] == second["message_id"]

    # a consumer takes the first, acks it, lets the second run out of attempts
    v2 = V2(broker.target, namespace="acme")
    try:
        got = messages(v2.receive("billing", "orders", invisible_s=1, batch=2))
        assert [m.system_properties.message_id for m in got] == [first["message_id"], second["message_id"]]
        v2.ack("billing", "orders", got[0])
        lag = _ok(api.get(f"{g}/lag/"))
        assert lag["total_lag"] == 1 and lag["queues"][0]["inflight"] == 1
        assert [c["client_id"] for c in _ok(api.get(f"{g}/clients/"))["results"]] == [v2.client_id]
        time.sleep(1.2)
        assert messages(v2.receive("billing", "orders", poll_s=0.5)) == []
        [dead] = _ok(api.get(f"{g}/dlq/"))["results"]
        assert dead["message_id"] == second["message_id"] and dead["topic"] == "orders"

        # redrive brings it back to this group
        assert _ok(api.post(f"{g}/dlq/redrive/", {"message_ids": [dead["message_id"]]}, format="json")) == {
            "redriven": 1
        }
        [back] = messages(v2.receive("billing", "orders", poll_s=3))
        assert back.system_properties.message_id == second["message_id"]
        v2.ack("billing", "orders", back)
        trace = _wait(
            lambda: [
                e["event"] for e in _ok(api.get(f"{t}/messages/{second['message_id']}/trace/"))["events"]
            ][-1:]
            == ["acked"]
        )
        assert trace
        events = _ok(api.get(f"{t}/messages/{second['message_id']}/trace/"))["events"]
        assert [e["event"] for e in events] == [
            "stored",
            "delivered",
            "dead_lettered",
            "redriven",
            "delivered",
            "acked",
        ]
        assert events[1]["client_id"] == v2.client_id and events[1]["group"] == "billing"

        # reset to the beginning: the live consumer reads both again
        reset = _ok(api.post(f"{g}/reset-offset/", {"topic": "orders", "to": "beginning"}, format="json"))
        assert reset == {"queues": [{"broker": "broker-a", "queue_id": 0, "offset": 0}]}
        again = messages(v2.receive("billing", "orders", batch=8))
        assert {m.system_properties.message_id for m in again} >= {first["message_id"], second["message_id"]}
    finally:
        v2.close()
    assert api.get(f"{t}/messages/NOPE/trace/").status_code == 404

    # a broker that is gone is 503 broker_unavailable
    broker.kill()
    gone = api.get(f"{t}/stats/")
    assert gone.status_code == 503 and gone.json()["error"]["code"] == "broker_unavailable"
