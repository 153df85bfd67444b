"""What the console pages show and keep: validation, the one-time secret, the switcher, htmx
fragments, data-plane views and their errors (on the in-memory broker gateway)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tenants.crypto import decrypt_secret
from tenants.models import AccessKey, AuditEvent, ConsumerGroup, Topic, TopicPlacement
from tenants.services.gateway import InMemoryBrokerGateway
from tenants.services.gateway_views import MessageRecord

from .conftest import Platform

pytestmark = pytest.mark.django_db


def test_invalid_topic_keeps_what_was_typed(platform: Platform, browser_for: Callable[..., Any]) -> None:
    response = browser_for("developer").post(
        "/t/acme/topics/new/",
        {
            "name": "bad name!",
            "description": "typed by hand",
            "message_type": "NORMAL",
            "queue_count": 4,
            "retention_hours": 72,
            "tiered_retention_hours": 0,
            "max_message_bytes": 1024,
        },
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "typed by hand" in html and "bad name!" in html
    assert "Use 1-100 letters" in html
    assert not Topic.objects.exists()


def test_quota_refusal_is_shown_on_the_form(platform: Platform, browser_for: Callable[..., Any]) -> None:
    platform.plan.max_topics = 0
    platform.plan.save()
    response = browser_for("owner").post(
        "/t/acme/topics/new/",
        {
            "name": "orders",
            "message_type": "NORMAL",
            "queue_count": 4,
            "retention_hours": 72,
            "tiered_retention_hours": 0,
            "max_message_bytes": 1024,
        },
    )
    assert response.status_code == 400
    assert "the most its quota allows" in response.content.decode()


def test_access_key_secret_is_shown_once(platform: Platform, browser_for: Callable[..., Any]) -> None:
    client = browser_for("admin")
    response = client.post("/t/acme/keys/new/", {"description": "ci"})
    key = AccessKey.objects.get(description="ci")
    secret = decrypt_secret(key.secret_encrypted)
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("no-store") or "no-store" in response["Cache-Control"]
    assert secret in response.content.decode()
    assert secret not in client.get("/t/acme/keys/").content.decode()
    assert not AuditEvent.objects.filter(after__icontains=secret).exists()


def test_switcher_keeps_the_section(platform: Platform, browser_for: Callable[..., Any]) -> None:
    client = browser_for("operator")
    response = client.get("/switch/", {"tenant": "globex", "section": "topic-list"})
    assert response["Location"] == "/t/globex/topics/"
    response = client.get("/switch/", {"tenant": "globex", "section": "../../admin"})
    assert response["Location"] == "/t/globex/"


def test_home_goes_to_the_last_tenant(platform: Platform, browser_for: Callable[..., Any]) -> None:
    client = browser_for("operator")
    client.get("/t/globex/")
    assert client.get("/")["Location"] == "/t/globex/"


def test_live_search_answers_a_fragment(platform: Platform, browser_for: Callable[..., Any]) -> None:
    for name in ("orders", "invoices"):
        Topic.objects.create(tenant=platform.tenant, name=name)
    response = browser_for("viewer").get("/t/acme/topics/", {"q": "ord"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith("<tbody") and "<html" not in html
    assert "orders" in html and "invoices" not in html
    # no write controls for a viewer
    assert "/t/acme/topics/orders/edit/" not in html


@pytest.fixture
def placed(platform: Platform) -> tuple[Topic, ConsumerGroup]:
    topic = Topic.objects.create(tenant=platform.tenant, name="orders", cluster=platform.cluster)
    TopicPlacement.objects.create(topic=topic, broker_group=platform.groups[0], queue_count=4)
    group = ConsumerGroup.objects.create(tenant=platform.tenant, name="billing", cluster=platform.cluster)
    return topic, group


def test_message_detail_renders_json_and_hex(
    platform: Platform, placed: Any, gateway: InMemoryBrokerGateway, browser_for: Callable[..., Any]
) -> None:
    gateway.fake_broker(platform.nodes[0].endpoint).messages.append(
        MessageRecord("M1", "acme%orders", 0, 0, b'{"a":[1,2]}', keys=("k1",), properties={"p": "v"})
    )
    client = browser_for("viewer")
    found = client.get("/t/acme/topics/orders/messages/", {"mode": "key", "key": "k1", "limit": 10})
    assert "/t/acme/topics/orders/messages/M1/" in found.content.decode()
    pretty = client.get("/t/acme/topics/orders/messages/M1/", {"as": "json"}).content.decode()
    assert "&quot;a&quot;: [\n    1," in pretty
    hexed = client.get("/t/acme/topics/orders/messages/M1/", {"as": "hex"}).content.decode()
    assert "00000000  7b 22 61 22" in hexed
    assert client.get("/t/acme/topics/orders/messages/NOPE/").status_code == 404


def test_search_needs_its_value(platform: Platform, placed: Any, browser_for: Callable[..., Any]) -> None:
    response = browser_for("viewer").get("/t/acme/topics/orders/messages/", {"mode": "id", "limit": 5})
    assert response.status_code == 400
    assert "Give a value to search by." in response.content.decode()


def test_unreachable_broker_is_reported_not_raised(
    platform: Platform, placed: Any, gateway: InMemoryBrokerGateway, browser_for: Callable[..., Any]
) -> None:
    gateway.down.add(platform.nodes[0].endpoint)
    client = browser_for("viewer")
    live = client.get("/t/acme/topics/orders/live/")
    assert live.status_code == 200
    assert "The brokers did not answer" in live.content.decode()
    assert "The brokers did not answer" in client.get("/t/acme/groups/billing/dlq/").content.decode()


def test_redrive_and_reset_are_audited(
    platform: Platform, placed: Any, gateway: InMemoryBrokerGateway, browser_for: Callable[..., Any]
) -> None:
    fake = gateway.fake_broker(platform.nodes[0].endpoint)
    fake.dead_letters["acme%billing"] = [MessageRecord(f"D{i}", "acme%orders", 0, i, b"x") for i in range(3)]
    client = browser_for("developer")
    page = client.get("/t/acme/groups/billing/dlq/").content.decode()
    assert page.count('name="message_ids"') == 3
    assert client.post("/t/acme/groups/billing/dlq/", {"all": "on"}).status_code == 302
    assert fake.dead_letters["acme%billing"] == []
    assert AuditEvent.objects.filter(after__has_key="redrive").count() == 1
    # nothing selected: refused with a reason, nothing recorded
    assert client.post("/t/acme/groups/billing/dlq/", {}).status_code == 400
    # a reset needs the confirmation box
    response = client.post("/t/acme/groups/billing/reset/", {"topic": "orders", "to": "end"})
    assert response.status_code == 400
    assert not AuditEvent.objects.filter(after__has_key="reset_offset").exists()
