"""Webhook signing of alert notifications: the exact bytes sent and their signature, a secret per
rule kept encrypted (never in the audit log), and rules saved without one getting one."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

from tenants.models import AlertRule, AuditEvent, ConsumerGroup, Tenant
from tenants.services import alerts
from tenants.services.audit import Actor

pytestmark = pytest.mark.django_db


def test_the_body_is_compact_sorted_json_with_sent_at_and_the_signature_covers_it() -> None:
    body, headers = alerts.sign_webhook(
        "whsec_k", {"rule": "r", "value": 7, "tenant": "acme"}, now=1_700_000_000.9
    )
    assert body == b'{"rule":"r","sent_at":1700000000,"tenant":"acme","value":7}'
    assert headers["X-MQCloud-Timestamp"] == "1700000000"
    assert headers["Content-Type"] == "application/json"
    # an independent HMAC-SHA256 of the raw bytes, keyed with the secret's UTF-8 bytes
    digest = hmac.new(b"whsec_k", body, hashlib.sha256).hexdigest()
    assert headers["X-MQCloud-Signature"] == f"sha256={digest}"
    assert alerts.webhook_signature("whsec_other", body) != headers["X-MQCloud-Signature"]


def test_each_rule_gets_its_own_encrypted_secret_and_rotation_replaces_it() -> None:
    tenant = Tenant.objects.create(name="Acme", namespace="acme")
    group = ConsumerGroup.objects.create(tenant=tenant, name="billing")
    fields = {"group": group, "lag_threshold": 5, "channel": "webhook", "webhook_url": "https://h.example/x"}
    one = alerts.create_alert_rule(Actor(), tenant, name="one", **fields)
    two = alerts.create_alert_rule(Actor(), tenant, name="two", **fields)
    s1, s2 = alerts.signing_secret(one), alerts.signing_secret(two)
    assert s1.startswith("whsec_") and s1 != s2
    stored = bytes(AlertRule.objects.get(pk=one.pk).signing_secret_encrypted)
    assert s1.encode() not in stored  # encrypted at rest
    new = alerts.rotate_signing_secret(Actor(), one)
    assert new != s1 and alerts.signing_secret(AlertRule.objects.get(pk=one.pk)) == new
    logged = str(list(AuditEvent.objects.values_list("before", "after")))
    assert s1 not in logged and new not in logged and "signing_secret_encrypted" not in logged
    assert AuditEvent.objects.filter(action="rotate", object_id=str(one.pk)).exists()


def test_a_rule_saved_without_a_secret_gets_one_and_keeps_it() -> None:
    tenant = Tenant.objects.create(name="Acme", namespace="acme")
    group = ConsumerGroup.objects.create(tenant=tenant, name="billing")
    rule = AlertRule.objects.create(
        tenant=tenant, group=group, name="raw", lag_threshold=1, email="a@b.example"
    )
    assert bytes(rule.signing_secret_encrypted) == b""
    stale = AlertRule.objects.get(pk=rule.pk)  # another worker's copy, read before the secret existed
    first = alerts.signing_secret(rule)
    # the other copy does not make a second one: it finds the first already set and uses it
    assert first.startswith("whsec_") and alerts.signing_secret(stale) == first
    assert alerts.signing_secret(AlertRule.objects.get(pk=rule.pk)) == first


def test_a_secret_the_keys_cannot_decrypt_is_a_delivery_error_not_a_crash(settings: Any) -> None:
    from django.core.cache import cache

    tenant = Tenant.objects.create(name="Acme", namespace="acme")
    group = ConsumerGroup.objects.create(tenant=tenant, name="billing")
    rule = alerts.create_alert_rule(
        Actor(),
        tenant,
        name="hook",
        group=group,
        lag_threshold=1,
        channel="webhook",
        webhook_url="https://h.example/x",
    )
    cache.delete(f"alert-test:{rule.pk}")
    settings.SECRET_KEY = "another deployment's key " * 3  # the derived Fernet key changes with it
    # the notification is not sent and says why (the evaluator records it on the AlertEvent)
    error = alerts.send_test_notification(rule)
    assert "cannot be decrypted" in error and "rotate it" in error
    # rotating under the current keys makes it usable again
    new = alerts.rotate_signing_secret(Actor(), rule)
    assert alerts.signing_secret(AlertRule.objects.get(pk=rule.pk)) == new
