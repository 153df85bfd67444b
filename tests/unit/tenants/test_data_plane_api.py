"""The data-plane views of the REST API (docs/control-plane.md, "Data-plane views"): topics' stats,
producers, messages, trace; groups' lag, clients, reset-offset, dlq, redrive; on the fake gateway."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest

from tenants.models import AuditEvent, ConsumerGroup, Topic, TopicPlacement
from tenants.services.gateway import InMemoryBrokerGateway
from tenants.services.gateway_views import ClientInfo, MessageRecord

from .conftest import Platform

pytestmark = pytest.mark.django_db


@pytest.fixture
def topic(platform: Platform) -> Topic:
    t = Topic.objects.create(tenant=platform.tenant, name="orders", queue_count=4, cluster=platform.cluster)
    for g in platform.groups[:2]:
        TopicPlacement.objects.create(topic=t, broker_group=g, queue_count=2)
    return t


@pytest.fixture
def group(platform: Platform) -> ConsumerGroup:
    return ConsumerGroup.objects.create(tenant=platform.tenant, name="billing", cluster=platform.cluster)


def _msg(
    mid: str, queue_id: int = 0, offset: int = 0, *, keys: tuple[str, ...] = (), ms: int = 0
) -> MessageRecord:
    return MessageRecord(
        message_id=mid,
        topic="acme%orders",
        queue_id=queue_id,
        queue_offset=offset,
        body=b"hello",
        tag="t",
        keys=keys,
        born_ms=ms or 1_700_000_000_000,
        store_ms=ms or 1_700_000_000_000,
        properties={"a": "1"},
        system_properties={"UNIQ_KEY": mid},
    )


def _url(obj: Topic | ConsumerGroup, tail: str) -> str:
    kind = "topics" if isinstance(obj, Topic) else "consumer-groups"
    return f"/api/v1/{kind}/{obj.pk}/{tail}"


def test_topic_stats_per_broker(platform: Platform, topic: Topic, gateway: InMemoryBrokerGateway) -> None:
    a, b = (n.endpoint for n in platform.nodes[:2])
    gateway.fake_broker(a).messages += [_msg("M1"), _msg("M2", offset=1)]
    gateway.fake_broker(b).messages += [_msg("M3", queue_id=1)]
    body = platform.client("viewer").get(_url(topic, "stats/")).json()
    assert body["topic"] == "orders" and body["messages_total"] == 3
    assert [(q["broker"], q["queue_id"], q["max_offset"]) for q in body["queues"]] == [
        ("broker-a", 0, 2),
        ("broker-b", 1, 1),
    ]
    assert body["queues"][0]["last_store_time"] == "2023-11-14T22:13:20.000Z"


def test_producers_are_the_topics_publishers(
    platform: Platform, topic: Topic, gateway: InMemoryBrokerGateway
) -> None:
    ep = platform.nodes[0].endpoint

    def client(cid: str, kind: str, topics: tuple[str, ...], ns: str = "acme") -> ClientInfo:
        return ClientInfo(cid, "PYTHON", "5.0", "ipv4:1.2.3.4:5", kind, "", topics, 1_700_000_000_000, ns)

    gateway.fake_broker(ep).clients += [
        client("p1", "PRODUCER", ("acme%orders",)),
        client("p2", "PRODUCER", ("acme%other",)),
        client("c1", "SIMPLE_CONSUMER", ("acme%orders",)),
        client("x1", "PRODUCER", ("acme%orders",), ns="globex"),
    ]
    rows = platform.client("developer").get(_url(topic, "producers/")).json()["results"]
    assert [(r["client_id"], r["broker"], r["language"]) for r in rows] == [("p1", "broker-a", "PYTHON")]
    assert rows[0]["last_seen"].startswith("2023-11-14T")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("message_id=M2", ["M2"], id="by-id"),
        pytest.param("key=k1", ["M1", "M3"], id="by-key"),
        pytest.param("begin=2023-11-14T22:13:20Z&end=2023-11-14T22:13:21Z", ["M1", "M2"], id="by-time"),
        pytest.param("queue_id=1&offset=0", ["M3"], id="by-queue"),
        pytest.param("queue_id=1&offset=0&broker=broker-a", [], id="by-queue-one-broker"),
        pytest.param("begin=2023-11-14T22:13:20Z&limit=1", ["M1"], id="limit"),
    ],
)
def test_message_queries(
    platform: Platform, topic: Topic, gateway: InMemoryBrokerGateway, query: str, expected: list[str]
) -> None:
    a, b = (n.endpoint for n in platform.nodes[:2])
    gateway.fake_broker(a).messages += [_msg("M1", keys=("k1",)), _msg("M2", offset=1, ms=1_700_000_000_500)]
    gateway.fake_broker(b).messages += [_msg("M3", queue_id=1, keys=("k1",), ms=1_700_000_009_000)]
    response = platform.client("viewer").get(_url(topic, f"messages/?{query}"))
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [m["message_id"] for m in results] == expected
    if results:
        m = results[0]
        assert m["topic"] == "orders" and m["broker"] in {"broker-a", "broker-b"}
        assert base64.b64decode(m["body_base64"]) == b"hello" and m["body_size"] == 5
        assert m["properties"] == {"a": "1"} and m["delivery_time"] is None


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("", id="nothing"),
        pytest.param("message_id=a&key=b", id="two-modes"),
        pytest.param("offset=3", id="offset-without-queue"),
        pytest.param("key=a b", id="key-with-space"),
        pytest.param("key=a&limit=999", id="limit-too-big"),
        pytest.param("begin=2024-01-02T00:00:00Z&end=2024-01-01T00:00:00Z", id="end-before-begin"),
    ],
)
def test_bad_queries_are_400(platform: Platform, topic: Topic, query: str) -> None:
    response = platform.client("viewer").get(_url(topic, f"messages/?{query}"))
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid"


def test_send_a_test_message_then_trace_it(platform: Platform, topic: Topic) -> None:
    api = platform.client("developer")
    sent = api.post(_url(topic, "messages/"), {"body": "hi", "tag": "t", "keys": ["k"]}, format="json")
    assert sent.status_code == 201, sent.content
    body = sent.json()
    assert set(body) == {"message_id", "queue_id", "queue_offset", "broker"}
    trace = api.get(_url(topic, f"messages/{body['message_id']}/trace/")).json()
    assert trace["message_id"] == body["message_id"]
    assert [e["event"] for e in trace["events"]] == ["stored"]
    assert api.get(_url(topic, "messages/NOPE/trace/")).status_code == 404
    found = api.get(_url(topic, f"messages/?message_id={body['message_id']}")).json()["results"]
    assert [base64.b64decode(m["body_base64"]) for m in found] == [b"hi"]


def test_message_group_goes_to_one_broker(platform: Platform, topic: Topic) -> None:
    api = platform.client("developer")
    brokers = {
        api.post(_url(topic, "messages/"), {"body": "x", "message_group": "g-1"}, format="json").json()[
            "broker"
        ]
        for _ in range(4)
    }
    assert len(brokers) == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({}, id="no-body"),
        pytest.param({"body": "x", "body_base64": "eA=="}, id="both"),
        pytest.param({"body_base64": "***"}, id="bad-base64"),
        pytest.param({"body_base64": ""}, id="empty"),
        pytest.param(
            {"body": "x", "message_group": "g", "delivery_time": "2030-01-01T00:00:00Z"}, id="fifo+delay"
        ),
    ],
)
def test_bad_test_messages_are_400(platform: Platform, topic: Topic, body: dict[str, Any]) -> None:
    response = platform.client("developer").post(_url(topic, "messages/"), body, format="json")
    assert response.status_code == 400, response.content


@pytest.mark.parametrize(("role", "expected"), [("viewer", 403), ("outsider", 404), ("operator", 201)])
def test_who_may_send(platform: Platform, topic: Topic, role: str, expected: int) -> None:
    response = platform.client(role).post(_url(topic, "messages/"), {"body": "x"}, format="json")
    assert response.status_code == expected


def test_outsiders_see_nothing(platform: Platform, topic: Topic, group: ConsumerGroup) -> None:
    api = platform.client("outsider")
    for url in (
        _url(topic, "stats/"),
        _url(topic, "producers/"),
        _url(topic, "messages/?key=a"),
        _url(topic, "messages/M1/trace/"),
        _url(group, "lag/"),
        _url(group, "clients/"),
        _url(group, "dlq/"),
    ):
        assert api.get(url).status_code == 404, url
    assert platform.client(None).get(_url(topic, "stats/")).status_code == 401


def test_an_unreachable_broker_is_503(
    platform: Platform, topic: Topic, gateway: InMemoryBrokerGateway
) -> None:
    gateway.down.add(platform.nodes[0].endpoint)
    response = platform.client("viewer").get(_url(topic, "stats/"))
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "broker_unavailable"


def test_group_lag_and_clients(
    platform: Platform, group: ConsumerGroup, gateway: InMemoryBrokerGateway
) -> None:
    ep = platform.nodes[1].endpoint
    b = gateway.fake_broker(ep)
    b.messages += [_msg(f"M{i}", offset=i) for i in range(5)]
    b.offsets[("acme%billing", "acme%orders", 0)] = 2
    b.offsets[("acme%billing", "%RETRY%acme%billing", 0)] = 0
    b.inflight[("acme%billing", "acme%orders", 0)] = 1
    b.clients.append(
        ClientInfo(
            "c1",
            "JAVA",
            "5.0.7",
            "ipv4:1.2.3.4:5",
            "PUSH_CONSUMER",
            "acme%billing",
            (),
            int(time.time() * 1000),
            "acme",
        )
    )
    api = platform.client("viewer")
    lag = api.get(_url(group, "lag/")).json()
    assert lag["group"] == "billing" and lag["total_lag"] == 3
    assert lag["queues"] == [
        {
            "topic": "orders",
            "broker": "broker-b",
            "queue_id": 0,
            "committed_offset": 2,
            "max_offset": 5,
            "lag": 3,
            "inflight": 1,
            "lag_ms": 0,
        }
    ]
    clients = api.get(_url(group, "clients/")).json()["results"]
    assert [(c["client_id"], c["broker"]) for c in clients] == [("c1", "broker-b")]


def test_reset_offset(
    platform: Platform, topic: Topic, group: ConsumerGroup, gateway: InMemoryBrokerGateway
) -> None:
    a = platform.nodes[0].endpoint
    gateway.fake_broker(a).messages += [_msg("M1"), _msg("M2", offset=1, ms=1_700_000_005_000)]
    api = platform.client("developer")
    end = api.post(_url(group, "reset-offset/"), {"topic": "orders", "to": "end"}, format="json")
    assert end.status_code == 200, end.content
    assert end.json() == {"queues": [{"broker": "broker-a", "queue_id": 0, "offset": 2}]}
    by_time = api.post(
        _url(group, "reset-offset/"),
        {"topic": str(topic.pk), "to": "time", "time": "2023-11-14T22:13:21Z"},
        format="json",
    )
    assert by_time.json()["queues"][0]["offset"] == 1
    event = AuditEvent.objects.filter(object_type="consumergroup").latest("created")
    assert event.after is not None and event.after["reset_offset"]["to"] == "time"
    # bad input and roles
    assert (
        api.post(_url(group, "reset-offset/"), {"topic": "orders", "to": "time"}, format="json").status_code
        == 400
    )
    assert (
        api.post(_url(group, "reset-offset/"), {"topic": "nope", "to": "end"}, format="json").status_code
        == 400
    )
    other = Topic.objects.create(tenant=platform.other, name="theirs")
    assert (
        api.post(
            _url(group, "reset-offset/"), {"topic": str(other.pk), "to": "end"}, format="json"
        ).status_code
        == 400
    )
    viewer = platform.client("viewer")
    assert (
        viewer.post(_url(group, "reset-offset/"), {"topic": "orders", "to": "end"}, format="json").status_code
        == 403
    )


def test_dead_letters_and_redrive(
    platform: Platform, group: ConsumerGroup, gateway: InMemoryBrokerGateway
) -> None:
    ep = platform.nodes[2].endpoint
    gateway.fake_broker(ep).dead_letters["acme%billing"] = [
        _msg("D1"),
        _msg("D2", offset=1),
        _msg("D3", offset=2),
    ]
    api = platform.client("developer")
    dead = api.get(_url(group, "dlq/?limit=2")).json()["results"]
    assert [(m["message_id"], m["topic"], m["broker"]) for m in dead] == [
        ("D1", "orders", "broker-c"),
        ("D2", "orders", "broker-c"),
    ]
    assert api.post(_url(group, "dlq/redrive/"), {"message_ids": ["D2"]}, format="json").json() == {
        "redriven": 1
    }
    assert [m["message_id"] for m in api.get(_url(group, "dlq/")).json()["results"]] == ["D1", "D3"]
    assert api.post(_url(group, "dlq/redrive/"), {"all": True}, format="json").json() == {"redriven": 2}
    assert api.get(_url(group, "dlq/")).json()["results"] == []
    assert api.post(_url(group, "dlq/redrive/"), {}, format="json").status_code == 400
    assert api.get(_url(group, "dlq/?limit=0")).status_code == 400
    viewer = platform.client("viewer")
    assert viewer.post(_url(group, "dlq/redrive/"), {"all": True}, format="json").status_code == 403
    event = AuditEvent.objects.filter(object_type="consumergroup").latest("created")
    assert event.after is not None and event.after["redrive"]["redriven"] == 2


def test_schema_describes_the_views(platform: Platform) -> None:
    schema = platform.client("viewer").get("/api/schema/?format=json").json()
    paths = set(schema["paths"])
    for path in (
        "/api/v1/topics/{id}/stats/",
        "/api/v1/topics/{id}/producers/",
        "/api/v1/topics/{id}/messages/",
        "/api/v1/topics/{id}/messages/{message_id}/trace/",
        "/api/v1/consumer-groups/{id}/lag/",
        "/api/v1/consumer-groups/{id}/clients/",
        "/api/v1/consumer-groups/{id}/reset-offset/",
        "/api/v1/consumer-groups/{id}/dlq/",
        "/api/v1/consumer-groups/{id}/dlq/redrive/",
    ):
        assert path in paths, path
    assert "post" in schema["paths"]["/api/v1/topics/{id}/messages/"]
