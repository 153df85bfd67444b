"""Alert rules end to end: the API (roles), the evaluation against a real broker's lag and dead
letters, notifications by webhook (a real HTTP server on loopback) and e-mail (Django's locmem
backend), and the fired alerts on the console's overview."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.choices import MembershipRole
from tenants.models import AlertEvent, AlertRule, AuditEvent, Tenant
from tenants.services import tenants as tenant_services
from tenants.services.audit import Actor
from tenants.tasks import evaluate_alert_rules_task
from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _ok(response: Any, code: int = 200) -> Any:
    assert response.status_code == code, response.content
    return response.json()


class Webhook:
    """A real HTTP server on 127.0.0.1 that records the JSON bodies POSTed to it, and each call's raw
    body and headers (to check signatures the way a receiver does)."""

    def __init__(self, status: int = 204) -> None:
        self.received: list[dict[str, Any]] = []
        self.raw: list[tuple[bytes, dict[str, str]]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                hook.raw.append((body, {k.lower(): v for k, v in self.headers.items()}))
                hook.received.append(json.loads(body))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/mq"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def signed_by(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    """What a receiver does (docs/console.md): recompute the HMAC-SHA256 of the raw body with the
    rule's secret, compare in constant time; the timestamp header is the body's ``sent_at``."""
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    fresh = abs(time.time() - int(headers["x-mqcloud-timestamp"])) < 300
    return (
        hmac.compare_digest(expected, headers["x-mqcloud-signature"])
        and json.loads(body)["sent_at"] == int(headers["x-mqcloud-timestamp"])
        and fresh
    )


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


def _member(tenant_id: int, username: str, role: str) -> tuple[Any, APIClient]:
    user = get_user_model().objects.create_user(username, password="pw-" + username)
    tenant = Tenant.objects.get(pk=tenant_id)
    tenant_services.add_member(Actor(), None, tenant, user, role)
    client = APIClient()
    client.force_authenticate(user)
    return user, client


def _platform(api: APIClient, broker: BrokerProcess) -> tuple[dict[str, Any], dict[str, Any]]:
    """A cluster with the real broker, tenant acme, topic orders (1 queue), group billing (1 attempt)."""
    cluster = _ok(
        api.post("/api/v1/broker-clusters/", {"name": "local", "is_default": True}, format="json"), 201
    )
    bg = _ok(
        api.post("/api/v1/broker-groups/", {"cluster": cluster["id"], "name": "broker-a"}, format="json"), 201
    )
    node = {"group": bg["id"], "name": "broker-a-0", "endpoint": broker.target}
    _ok(api.post("/api/v1/broker-nodes/", node, format="json"), 201)
    tenant = _ok(api.post("/api/v1/tenants/", {"name": "Acme", "namespace": "acme"}, format="json"), 201)
    topic = {"tenant": tenant["id"], "name": "orders", "queue_count": 1}
    _ok(api.post("/api/v1/topics/", topic, format="json"), 201)
    group = {"tenant": tenant["id"], "name": "billing", "max_delivery_attempts": 1}
    cg = _ok(api.post("/api/v1/consumer-groups/", group, format="json"), 201)
    return tenant, cg


def test_rules_fire_on_real_lag_and_dead_letters(
    broker: BrokerProcess, operator_client: APIClient, webhook: Webhook, settings: Any
) -> None:
    settings.MQ_ALERT_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on loopback
    api = operator_client
    tenant, cg = _platform(api, broker)
    _, dev_api = _member(tenant["id"], "dana", MembershipRole.DEVELOPER)
    viewer, viewer_api = _member(tenant["id"], "vic", MembershipRole.VIEWER)

    # given: 4 messages; a consumer acks the first, lets the second run out of its single attempt
    topic_id = _ok(api.get("/api/v1/topics/?name=orders"))["results"][0]["id"]
    for i in range(4):
        _ok(api.post(f"/api/v1/topics/{topic_id}/messages/", {"body": f"m{i}"}, format="json"), 201)
    v2 = V2(broker.target, namespace="acme")
    try:
        got = messages(v2.receive("billing", "orders", invisible_s=1, batch=2))
        assert len(got) == 2
        v2.ack("billing", "orders", got[0])
        time.sleep(1.2)
        messages(v2.receive("billing", "orders", batch=1, invisible_s=30, poll_s=0.5))
    finally:
        v2.close()
    dead = _ok(api.get(f"/api/v1/consumer-groups/{cg['id']}/dlq/"))["results"]
    assert len(dead) == 1
    lag = _ok(api.get(f"/api/v1/consumer-groups/{cg['id']}/lag/"))["total_lag"]
    assert lag >= 1

    # when: a viewer tries to create a rule, a developer sends an invalid one, then two valid ones
    lag_rule = {
        "tenant": tenant["id"],
        "name": "billing behind",
        "group": cg["id"],
        "lag_threshold": lag,
        "channel": "webhook",
        "webhook_url": webhook.url,
    }
    refused = viewer_api.post("/api/v1/alert-rules/", lag_rule, format="json")
    assert refused.status_code == 403
    invalid = dev_api.post(
        "/api/v1/alert-rules/", {**lag_rule, "lag_threshold": None, "webhook_url": ""}, format="json"
    )
    assert invalid.status_code == 400
    assert set(invalid.json()["error"]["fields"]) >= {"lag_threshold", "dlq_threshold", "webhook_url"}
    made = _ok(dev_api.post("/api/v1/alert-rules/", lag_rule, format="json"), 201)
    # the rule's webhook signing secret: in the create answer, readable again by developers, not viewers
    secret = made["signing_secret"]
    assert secret.startswith("whsec_") and len(secret) > 40
    assert _ok(dev_api.get(f"/api/v1/alert-rules/{made['id']}/signing-secret/"))["signing_secret"] == secret
    assert viewer_api.get(f"/api/v1/alert-rules/{made['id']}/signing-secret/").status_code == 403
    assert "signing_secret" not in _ok(viewer_api.get(f"/api/v1/alert-rules/{made['id']}/"))
    dlq_rule = {
        "tenant": tenant["id"],
        "name": "billing dead letters",
        "group": cg["id"],
        "dlq_threshold": 1,
        "channel": "email",
        "email": "oncall@example.com",
    }
    _ok(dev_api.post("/api/v1/alert-rules/", dlq_rule, format="json"), 201)
    quiet = {**dlq_rule, "name": "never", "dlq_threshold": 50}
    _ok(dev_api.post("/api/v1/alert-rules/", quiet, format="json"), 201)
    assert {r["name"] for r in _ok(viewer_api.get("/api/v1/alert-rules/"))["results"]} == {
        "billing behind",
        "billing dead letters",
        "never",
    }
    assert viewer_api.delete(f"/api/v1/alert-rules/{made['id']}/").status_code == 403
    assert AuditEvent.objects.filter(object_type="alertrule", action="create").count() == 3

    # then: the evaluation (the Celery task) notifies both channels and records the alerts
    result = evaluate_alert_rules_task.delay().get()
    assert result["rules"] == 3 and result["firing"] == 2 and result["notified"] == 2
    [hook_call] = webhook.received
    assert hook_call["tenant"] == "acme" and hook_call["group"] == "billing"
    # signed: the receiver recomputes the HMAC of the raw body with the rule's secret, and it matches
    [(body, headers)] = webhook.raw
    assert headers["content-type"] == "application/json"
    assert signed_by(secret, body, headers)
    assert not signed_by("whsec_" + "x" * 43, body, headers)
    assert not signed_by(secret, body.replace(b'"acme"', b'"evil"'), headers)
    assert hook_call["metric"] == "lag" and hook_call["value"] == lag and hook_call["threshold"] == lag
    [email] = mail.outbox
    assert email.to == ["oncall@example.com"] and "dead letters at 1" in email.subject
    events = {e.rule_name: e for e in AlertEvent.objects.all()}
    assert set(events) == {"billing behind", "billing dead letters"}
    assert events["billing dead letters"].value == 1 and events["billing behind"].delivered
    assert AlertRule.objects.get(name="billing behind").firing
    assert not AlertRule.objects.get(name="never").firing

    # a rule that stays firing does not notify again at the next evaluation
    again = evaluate_alert_rules_task.delay().get()
    assert again["firing"] == 2 and again["notified"] == 0
    assert len(webhook.received) == 1 and len(mail.outbox) == 1

    # the overview's alerts panel shows them to every member, the API lists them
    page = Client()
    page.force_login(viewer)
    html = page.get("/t/acme/").content.decode()
    assert 'id="fired-alerts"' in html and "billing behind" in html and "billing dead letters" in html
    listed = _ok(viewer_api.get("/api/v1/alert-events/"))["results"]
    assert {e["rule_name"] for e in listed} == {"billing behind", "billing dead letters"}

    # raising the threshold above the lag: the rule stops firing at the next evaluation
    _ok(dev_api.patch(f"/api/v1/alert-rules/{made['id']}/", {"lag_threshold": lag + 100}, format="json"))
    evaluate_alert_rules_task.delay().get()
    assert not AlertRule.objects.get(pk=made["id"]).firing

    # a broker that is gone: nothing is notified, the rules keep their state
    broker.kill()
    gone = evaluate_alert_rules_task.delay().get()
    assert gone["unreachable_groups"] == ["acme%billing"] and gone["notified"] == 0
    assert AlertRule.objects.get(name="billing dead letters").firing
    assert AlertEvent.objects.count() == 2


def test_webhook_to_a_private_address_is_refused_and_recorded(
    broker: BrokerProcess, operator_client: APIClient, webhook: Webhook
) -> None:
    # given: a rule whose webhook points at the platform's own loopback (SSRF), with the default settings
    api = operator_client
    tenant, cg = _platform(api, broker)
    topic_id = _ok(api.get("/api/v1/topics/?name=orders"))["results"][0]["id"]
    _ok(api.post(f"/api/v1/topics/{topic_id}/messages/", {"body": "x"}, format="json"), 201)
    v2 = V2(broker.target, namespace="acme")
    try:
        messages(v2.receive("billing", "orders", batch=1, invisible_s=30))  # the group starts consuming
    finally:
        v2.close()
    rule = {
        "tenant": tenant["id"],
        "name": "internal",
        "group": cg["id"],
        "lag_threshold": 1,
        "channel": "webhook",
        "webhook_url": webhook.url,
    }
    _ok(api.post("/api/v1/alert-rules/", rule, format="json"), 201)
    # when
    result = evaluate_alert_rules_task.delay().get()
    # then: nothing reached the receiver; the alert is recorded as not delivered, with the reason
    assert result["firing"] == 1 and result["failed"] == 1 and webhook.received == []
    [event] = AlertEvent.objects.all()
    assert not event.delivered and "not a public address" in event.delivery_error


def test_overlapping_evaluations_notify_once(webhook: Webhook, settings: Any) -> None:
    # given: a rule that two evaluations (a slow run and the next beat) both found reached
    from tenants.choices import AlertMetric
    from tenants.models import ConsumerGroup
    from tenants.services.alerts import Breach, EvaluationReport, _apply

    settings.MQ_ALERT_WEBHOOK_ALLOW_PRIVATE = True
    tenant = Tenant.objects.create(name="Acme", namespace="acme")
    group = ConsumerGroup.objects.create(tenant=tenant, name="billing")
    AlertRule.objects.create(
        tenant=tenant, group=group, name="behind", lag_threshold=5, channel="webhook", webhook_url=webhook.url
    )
    first, second = AlertRule.objects.get(), AlertRule.objects.get()  # each run's own copy
    breach = [Breach(AlertMetric.LAG, 9, 5)]
    report = EvaluationReport()
    # when both apply it
    _apply(first, breach, timezone.now(), report)
    _apply(second, breach, timezone.now(), report)
    # then: one notification, one recorded alert
    assert report.notified == 1 and len(webhook.received) == 1 and AlertEvent.objects.count() == 1
    assert AlertRule.objects.get().firing
