"""Alert rules: their life cycle (audited), their evaluation against the brokers' figures, and the
notifications (e-mail through Django's mail, webhooks as a signed JSON POST through httpx).

Each rule has a webhook signing secret, made at creation (and on rotation). A webhook POST carries
``X-MQCloud-Signature: sha256=<hex HMAC-SHA256 of the raw body>`` and ``X-MQCloud-Timestamp`` (Unix
seconds, also ``sent_at`` in the signed body), so the receiver can tell the call came from us and
is fresh; docs/console.md shows how to verify it.

The evaluation runs in Celery beat (``tenants.evaluate_alert_rules``); every notification sent is
recorded as an AlertEvent, which the console's overview shows.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from tenants.choices import AlertChannel, AlertMetric, AuditAction, ProvisioningStatus
from tenants.constants import (
    ALERT_DLQ_COUNT_CAP,
    ALERT_RENOTIFY_AFTER,
    ALERT_SIGNATURE_HEADER,
    ALERT_SIGNING_SECRET_BYTES,
    ALERT_SIGNING_SECRET_PREFIX,
    ALERT_TEST_INTERVAL_S,
    ALERT_TIMESTAMP_HEADER,
    ALERT_WEBHOOK_TIMEOUT_S,
)
from tenants.crypto import decrypt_secret, encrypt_secret
from tenants.errors import AlreadyExists, BrokerUnavailable, ControlPlaneError, InvalidState
from tenants.models import AlertEvent, AlertRule, ConsumerGroup, Tenant
from tenants.services import webhook_post
from tenants.services.audit import Actor, create_audited, delete_audited, record_event, update_audited
from tenants.services.observe import group_lag, group_nodes
from tenants.services.provisioning import get_gateway

__all__ = (
    "Breach",
    "EvaluationReport",
    "alert_events",
    "alert_rules",
    "count_dead_letters",
    "create_alert_rule",
    "delete_alert_rule",
    "evaluate_alert_rules",
    "recent_alerts",
    "rotate_signing_secret",
    "send_test_notification",
    "sign_webhook",
    "signing_secret",
    "update_alert_rule",
    "webhook_signature",
)

logger = logging.getLogger(__name__)

# Fields a caller may set on a rule (the rest is the evaluator's bookkeeping).
RULE_FIELDS = frozenset(
    {"group", "name", "lag_threshold", "dlq_threshold", "channel", "email", "webhook_url", "enabled"}
)


#
# Rules
#


def alert_rules(tenant: Tenant) -> QuerySet[AlertRule, Any]:
    return AlertRule.objects.filter(tenant=tenant).select_related("group").order_by("name")


def alert_events(tenant: Tenant) -> QuerySet[AlertEvent, Any]:
    """The alerts the tenant's rules fired, newest first."""
    return AlertEvent.objects.filter(tenant=tenant).order_by("-created", "-id")


def recent_alerts(tenant: Tenant, since: datetime | None = None, limit: int = 5) -> list[AlertEvent]:
    """The newest alerts fired since ``since`` (default: the last 24 hours), for the overview."""
    since = since or timezone.now() - timedelta(hours=24)
    return list(alert_events(tenant).filter(created__gte=since)[:limit])


def _validated(rule: AlertRule) -> AlertRule:
    """Model validation as a domain error whose messages land on the form's (or API's) fields."""
    if rule.group_id is not None and rule.group.tenant_id != rule.tenant_id:
        raise ControlPlaneError(
            "The consumer group is not in this tenant.", {"group": ["Choose one of the tenant's groups."]}
        )
    if AlertRule.objects.filter(tenant_id=rule.tenant_id, name=rule.name).exclude(pk=rule.pk).exists():
        raise AlreadyExists(
            f"An alert rule named '{rule.name}' exists in this tenant.",
            {"name": ["An alert rule with this name exists in the tenant."]},
        )
    try:
        rule.full_clean(validate_constraints=False)
    except ValidationError as exc:
        fields = {k: [str(m) for m in v] for k, v in exc.message_dict.items()}
        first = next(iter(fields.values()))[0]
        raise ControlPlaneError(first, fields) from exc
    # a disabled channel's destination is not kept: it would still look configured
    if rule.channel == AlertChannel.EMAIL:
        rule.webhook_url = ""
    else:
        rule.email = ""
    return rule


def _unknown(fields: dict[str, Any]) -> None:
    unknown = fields.keys() - RULE_FIELDS
    if unknown:
        raise ControlPlaneError(f"Unknown alert rule fields: {', '.join(sorted(unknown))}.")


def _new_signing_secret() -> str:
    return ALERT_SIGNING_SECRET_PREFIX + secrets.token_urlsafe(ALERT_SIGNING_SECRET_BYTES)


def signing_secret(rule: AlertRule) -> str:
    """The rule's webhook signing secret in the clear (for its receiver's configuration, and to sign).

    A rule saved without one (made outside these services) gets one now; set only if still empty,
    so two callers at once agree on the same secret.
    """
    if not bytes(rule.signing_secret_encrypted):
        fresh = encrypt_secret(_new_signing_secret())
        AlertRule.objects.filter(pk=rule.pk, signing_secret_encrypted=b"").update(
            signing_secret_encrypted=fresh
        )
        rule.signing_secret_encrypted = AlertRule.objects.values_list(
            "signing_secret_encrypted", flat=True
        ).get(pk=rule.pk)
    try:
        return decrypt_secret(rule.signing_secret_encrypted)
    except InvalidToken as exc:  # encrypted under a key this deployment no longer has
        raise InvalidState(
            f"The signing secret of the alert rule '{rule.name}' cannot be decrypted with this "
            "deployment's keys (MQ_SECRETS_KEY or SECRET_KEY changed); rotate it."
        ) from exc


@transaction.atomic
def create_alert_rule(actor: Actor, tenant: Tenant, **fields: Any) -> AlertRule:
    """Create a rule on one of the tenant's consumer groups (audited), with its own signing secret."""
    _unknown(fields)
    rule = _validated(AlertRule(tenant=tenant, **fields))
    rule.signing_secret_encrypted = encrypt_secret(_new_signing_secret())
    try:
        with transaction.atomic():
            create_audited(actor, rule)
    except IntegrityError as exc:  # a concurrent create of the same name
        raise AlreadyExists(f"An alert rule named '{rule.name}' exists in this tenant.") from exc
    return rule


@transaction.atomic
def update_alert_rule(actor: Actor, rule: AlertRule, **changes: Any) -> AlertRule:
    """Change a rule (audited); a changed threshold is judged afresh at the next evaluation."""
    _unknown(changes)
    if not changes:
        return rule
    candidate = AlertRule.objects.select_for_update().get(pk=rule.pk)
    for name, value in changes.items():
        setattr(candidate, name, value)
    _validated(candidate)
    cleaned = {
        name: getattr(candidate, name)
        for name in (*changes, "email", "webhook_url")
        if getattr(candidate, name) != getattr(rule, name)
    }
    if cleaned.keys() & {"lag_threshold", "dlq_threshold", "enabled", "group"}:
        cleaned["firing"] = False
    update_audited(actor, rule, cleaned)
    return rule


@transaction.atomic
def rotate_signing_secret(actor: Actor, rule: AlertRule) -> str:
    """Replace the rule's signing secret (audited, the secret itself never is); returns the new one.

    The old secret stops at once: webhooks sent after this are signed with the new one only.
    """
    secret = _new_signing_secret()
    rule.signing_secret_encrypted = encrypt_secret(secret)
    rule.save(update_fields=["signing_secret_encrypted", "updated"])
    record_event(actor, AuditAction.ROTATE, rule, after={"signing_secret": "rotated"})
    return secret


@transaction.atomic
def delete_alert_rule(actor: Actor, rule: AlertRule) -> AlertRule:
    """Delete a rule (audited); the alerts it fired stay in the history."""
    delete_audited(actor, rule)
    return rule


#
# Evaluation
#


@dataclass(frozen=True, slots=True)
class Breach:
    """A threshold a group reached."""

    metric: AlertMetric
    value: int
    threshold: int


@dataclass(slots=True)
class EvaluationReport:
    rules: int = 0
    firing: int = 0
    notified: int = 0
    failed: int = 0
    unreachable_groups: list[str] = field(default_factory=list)


def count_dead_letters(group: ConsumerGroup, cap: int = ALERT_DLQ_COUNT_CAP) -> int:
    """Dead letters of the group not yet re-driven, over all its brokers (counted up to ``cap``)."""
    gw = get_gateway()
    total = 0
    for node in group_nodes(group):
        total += len(gw.list_dead_letters(node.endpoint, group.qualified_name, cap))
        if total >= cap:
            return cap
    return total


def _measure(group: ConsumerGroup, lag: bool, dlq: bool) -> dict[AlertMetric, int]:
    figures: dict[AlertMetric, int] = {}
    if lag:
        figures[AlertMetric.LAG] = int(group_lag(group)["total_lag"])
    if dlq:
        figures[AlertMetric.DLQ] = count_dead_letters(group)
    return figures


def _breaches(rule: AlertRule, figures: dict[AlertMetric, int]) -> list[Breach]:
    found = []
    for metric, threshold in ((AlertMetric.LAG, rule.lag_threshold), (AlertMetric.DLQ, rule.dlq_threshold)):
        if threshold is not None and figures.get(metric, 0) >= threshold:
            found.append(Breach(metric, figures[metric], threshold))
    return found


def evaluate_alert_rules(now: datetime | None = None) -> EvaluationReport:
    """Measure every enabled rule's group once, fire the rules whose thresholds are reached.

    A rule notifies when it starts firing, and again every ``ALERT_RENOTIFY_AFTER`` while it stays
    firing. A group whose brokers do not answer is skipped: its rules keep their state.
    """
    now = now or timezone.now()
    report = EvaluationReport()
    rules = (
        AlertRule.objects.filter(enabled=True)
        .exclude(group__status=ProvisioningStatus.DELETING)
        .select_related("group__tenant", "tenant")
        .order_by("group_id", "pk")
    )
    by_group: dict[int, list[AlertRule]] = {}
    for rule in rules:
        by_group.setdefault(rule.group_id, []).append(rule)
    for group_rules in by_group.values():
        group = group_rules[0].group
        try:
            figures = _measure(
                group,
                lag=any(r.lag_threshold is not None for r in group_rules),
                dlq=any(r.dlq_threshold is not None for r in group_rules),
            )
        except BrokerUnavailable as exc:
            logger.warning("alert rules of %s not evaluated: %s", group.qualified_name, exc.message)
            report.unreachable_groups.append(group.qualified_name)
            continue
        for rule in group_rules:
            report.rules += 1
            _apply(rule, _breaches(rule, figures), now, report)
    return report


def _apply(rule: AlertRule, breaches: list[Breach], now: datetime, report: EvaluationReport) -> None:
    firing = bool(breaches)
    report.firing += firing
    due = firing and (
        not rule.firing or rule.last_notified is None or now - rule.last_notified >= ALERT_RENOTIFY_AFTER
    )
    state = AlertRule.objects.filter(pk=rule.pk)
    # Claim the notification first (compare-and-set on last_notified): an evaluation running at the
    # same time (a slow run overlapping the next beat) finds it claimed and stays quiet.
    if due and state.filter(last_notified=rule.last_notified).update(last_notified=now) == 1:
        for breach in breaches:
            event = _notify(rule, breach, now)
            report.notified += event.delivered
            report.failed += not event.delivered
    # Only the evaluator's fields: an edit saved meanwhile is kept.
    state.update(firing=firing, last_evaluated=now)


#
# Notification
#


def _payload(rule: AlertRule, breach: Breach, now: datetime) -> dict[str, Any]:
    return {
        "alert": "consumer_group_lag" if breach.metric == AlertMetric.LAG else "consumer_group_dead_letters",
        "tenant": rule.tenant.namespace,
        "group": rule.group.name,
        "rule": rule.name,
        "metric": str(breach.metric),
        "value": breach.value,
        "threshold": breach.threshold,
        "fired_at": now.isoformat(),
    }


def webhook_signature(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of the raw body, keyed with the secret's UTF-8 bytes."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def sign_webhook(
    secret: str, payload: dict[str, Any], now: float | None = None
) -> tuple[bytes, dict[str, str]]:
    """The exact body to POST (with ``sent_at``) and its headers: content type, timestamp, signature.

    The body is serialized once here and sent as these bytes: a receiver verifies the bytes it got,
    so nothing may re-encode it in between.
    """
    sent_at = int(time.time() if now is None else now)
    body = json.dumps({**payload, "sent_at": sent_at}, separators=(",", ":"), sort_keys=True).encode()
    headers = {
        "Content-Type": "application/json",
        ALERT_TIMESTAMP_HEADER: str(sent_at),
        ALERT_SIGNATURE_HEADER: webhook_signature(secret, body),
    }
    return body, headers


def _send_webhook(url: str, payload: dict[str, Any], secret: str) -> None:
    """POST the signed payload. Loopback, private and link-local destinations are refused (a tenant
    must not reach the platform's own network through a webhook; webhook_post.py checks the address
    the request goes to) unless ``MQ_ALERT_WEBHOOK_ALLOW_PRIVATE`` is set."""
    body, headers = sign_webhook(secret, payload)
    public_only = not getattr(settings, "MQ_ALERT_WEBHOOK_ALLOW_PRIVATE", False)
    try:
        status = webhook_post.post(url, body, headers, ALERT_WEBHOOK_TIMEOUT_S, public_only=public_only)
    except webhook_post.WebhookUnreachable as exc:
        raise ControlPlaneError(str(exc)) from exc
    if status >= 300:
        raise ControlPlaneError(f"The webhook answered HTTP {status}.")


def _send_email(address: str, rule: AlertRule, breach: Breach, payload: dict[str, Any]) -> None:
    what = "lag" if breach.metric == AlertMetric.LAG else "dead letters"
    test = "[test] " if payload.get("test") else ""
    subject = f"[MQCloud] {test}{rule.tenant.namespace}/{rule.group.name}: {what} at {breach.value}"
    if payload.get("test"):
        body = (
            f"This is a test notification of the alert rule '{rule.name}' of tenant "
            f"{rule.tenant.namespace} (consumer group {rule.group.name}), sent from the console. "
            "Nothing has fired; real alerts come to this address the same way."
        )
        send_mail(subject, body, None, [address])
        return
    body = (
        f"The alert rule '{rule.name}' of tenant {rule.tenant.namespace} fired.\n\n"
        f"Consumer group {rule.group.name} has {what} at {breach.value}; the threshold is "
        f"{breach.threshold}.\nFired at {payload['fired_at']}.\n\n"
        "You get this again every hour while it stays above the threshold."
    )
    send_mail(subject, body, None, [address])


def _deliver(rule: AlertRule, breach: Breach, payload: dict[str, Any]) -> str:
    """Send one notification on the rule's channel; the reason it failed, or "" when delivered."""
    try:
        if rule.channel == AlertChannel.WEBHOOK:
            _send_webhook(rule.webhook_url, payload, signing_secret(rule))
        else:
            _send_email(rule.email, rule, breach, payload)
    except ControlPlaneError as exc:
        return exc.message
    except OSError as exc:  # SMTP connection problems
        return f"The e-mail could not be sent: {exc}"
    return ""


def _notify(rule: AlertRule, breach: Breach, now: datetime) -> AlertEvent:
    """Send one notification and record it, delivered or not (the error is kept for the console)."""
    error = _deliver(rule, breach, _payload(rule, breach, now))
    if error:
        logger.warning("alert %s of %s not delivered: %s", rule.name, rule.tenant.namespace, error)
    return AlertEvent.objects.create(
        tenant=rule.tenant,
        rule=rule,
        rule_name=rule.name,
        group_name=rule.group.name,
        metric=breach.metric,
        value=breach.value,
        threshold=breach.threshold,
        channel=rule.channel,
        target=rule.target,
        delivered=not error,
        delivery_error=error,
    )


def send_test_notification(rule: AlertRule) -> str:
    """Send a notification marked ``"test": true`` now, so people can check the destination works.

    Not recorded as a fired alert. At most one per rule per ``ALERT_TEST_INTERVAL_S`` (the button
    must not turn into a way to flood an address). Returns "" when delivered, else the reason.
    """
    if not cache.add(f"alert-test:{rule.pk}", 1, ALERT_TEST_INTERVAL_S):
        raise InvalidState(f"One was sent less than {ALERT_TEST_INTERVAL_S} s ago; try again in a minute.")
    metric = AlertMetric.LAG if rule.lag_threshold is not None else AlertMetric.DLQ
    threshold = (rule.lag_threshold if metric == AlertMetric.LAG else rule.dlq_threshold) or 0
    breach = Breach(metric, threshold, threshold)
    payload = {**_payload(rule, breach, timezone.now()), "test": True}
    return _deliver(rule, breach, payload)
