"""Every console page and action against every role.

Members read every page of their tenant (alert rules and lag history too); writes follow the API's
matrix (docs/control-plane.md): developers manage topics, groups and alert rules, owners/admins also
keys, ACLs, members and the tenant name, operators everything (quotas and platform pages, broker
groups and run reports included, only them). Another tenant's pages are 404.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from django.core import mail
from django.core.cache import cache

from tenants.models import (
    AccessKey,
    AclPolicy,
    AlertRule,
    AuditEvent,
    ConsumerGroup,
    JobRun,
    Membership,
    Plan,
    Quota,
    Topic,
    TopicPlacement,
)
from tenants.services import access_keys
from tenants.services.audit import Actor
from tenants.services.gateway_views import MessageRecord
from tenants.services.provisioning import get_gateway

from .conftest import ROLES, Platform

MEMBERS = {"owner", "admin", "developer", "viewer"}
MANAGE = {"owner", "admin"}
BUILD = MANAGE | {"developer"}


def _seed(p: Platform, tmp: Path | None = None) -> dict[str, Any]:
    topic = Topic.objects.create(tenant=p.tenant, name="orders", cluster=p.cluster)
    TopicPlacement.objects.create(topic=topic, broker_group=p.groups[0], queue_count=8)
    group = ConsumerGroup.objects.create(tenant=p.tenant, name="billing", cluster=p.cluster)
    broker = get_gateway().fake_broker(p.nodes[0].endpoint)  # type: ignore[attr-defined]
    broker.messages.append(MessageRecord("M1", "acme%orders", 0, 0, b'{"a": 1}', store_ms=1_700_000_000_000))
    broker.dead_letters["acme%billing"] = [MessageRecord("D1", "acme%orders", 0, 0, b"dead")]
    key = access_keys.create_access_key(Actor(), p.tenant, "app")[0]
    acl = AclPolicy.objects.create(tenant=p.tenant, principal="*", resource_type="Topic", actions=["Pub"])
    quota = Quota.objects.create(tenant=p.tenant, topic=topic, produce_messages_per_s=10)
    viewer = Membership.objects.get(tenant=p.tenant, user=p.users["viewer"])
    rule = AlertRule.objects.create(
        tenant=p.tenant, group=group, name="watch", lag_threshold=100, email="oncall@example.com"
    )
    cache.delete(f"alert-test:{rule.pk}")  # the test button's once-a-minute mark of an earlier test
    # a billing run with a report on disk (a page and a chart), for the operators' report page
    report = (tmp or Path("/nonexistent")) / "reports" / "billing" / "date=2026-10-02"
    if tmp is not None:
        report.mkdir(parents=True)
        (report / "index.html").write_text('<img src="tenant_usage.png">')
        (report / "tenant_usage.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    run = JobRun.objects.create(
        job="billing", date=date(2026, 10, 2), status="succeeded", details={"report": str(report), "days": []}
    )
    return {
        "topic": topic,
        "group": group,
        "key": key,
        "acl": acl,
        "quota": quota,
        "viewer": viewer,
        "rule": rule,
        "run": run,
    }


# (url template, roles besides the operator that get 200)
PAGES: list[tuple[str, set[str]]] = [
    ("/t/acme/", MEMBERS),
    ("/t/acme/topics/", MEMBERS),
    ("/t/acme/topics/orders/", MEMBERS),
    ("/t/acme/topics/orders/live/", MEMBERS),
    ("/t/acme/topics/orders/messages/", MEMBERS),
    ("/t/acme/topics/orders/messages/M1/", MEMBERS),
    ("/t/acme/topics/orders/send/", BUILD),
    ("/t/acme/topics/new/", BUILD),
    ("/t/acme/topics/orders/edit/", BUILD),
    ("/t/acme/topics/orders/delete/", BUILD),
    ("/t/acme/groups/", MEMBERS),
    ("/t/acme/groups/billing/", MEMBERS),
    ("/t/acme/groups/billing/?range=1h", MEMBERS),  # lag history over an hour
    ("/t/acme/groups/billing/?range=7d", MEMBERS),
    ("/t/acme/groups/billing/live/", MEMBERS),
    ("/t/acme/groups/billing/dlq/", MEMBERS),
    ("/t/acme/groups/billing/reset/", BUILD),
    ("/t/acme/overview/lag/", MEMBERS),
    ("/t/acme/groups/new/", BUILD),
    ("/t/acme/groups/billing/edit/", BUILD),
    ("/t/acme/groups/billing/delete/", BUILD),
    ("/t/acme/keys/", MEMBERS),
    ("/t/acme/keys/new/", MANAGE),
    ("/t/acme/keys/{key}/rotate/", MANAGE),
    ("/t/acme/keys/{key}/revoke/", MANAGE),
    ("/t/acme/acls/", MEMBERS),
    ("/t/acme/acls/new/", MANAGE),
    ("/t/acme/acls/{acl}/edit/", MANAGE),
    ("/t/acme/acls/{acl}/delete/", MANAGE),
    ("/t/acme/quotas/", MEMBERS),
    ("/t/acme/quotas/new/", set()),
    ("/t/acme/quotas/{quota}/edit/", set()),
    ("/t/acme/quotas/{quota}/delete/", set()),
    ("/t/acme/members/", MEMBERS),
    ("/t/acme/members/{viewer}/role/", MANAGE),
    ("/t/acme/members/{viewer}/remove/", MANAGE),
    ("/t/acme/settings/", MEMBERS),
    ("/t/acme/audit/", MEMBERS),
    ("/t/acme/billing/", MEMBERS),
    ("/t/acme/alerts/", MEMBERS),
    ("/t/acme/alerts/new/", BUILD),
    ("/t/acme/alerts/new/?group={group}", BUILD),
    ("/t/acme/alerts/{rule}/edit/", BUILD),
    ("/t/acme/alerts/{rule}/delete/", BUILD),
    ("/t/acme/alerts/{rule}/secret/", BUILD),  # the webhook signing secret: not for viewers
    ("/t/acme/alerts/{rule}/secret/rotate/", BUILD),
]

PLATFORM_PAGES = [
    "/platform/",
    "/platform/tenants/",
    "/platform/tenants/new/",
    "/platform/tenants/{tenant}/edit/",
    "/platform/tenants/{tenant}/delete/",
    "/platform/plans/",
    "/platform/plans/new/",
    "/platform/plans/{plan}/edit/",
    "/platform/plans/{plan}/delete/",
    "/platform/brokers/",
    "/platform/clusters/new/",
    "/platform/clusters/{cluster}/edit/",
    "/platform/broker-groups/new/",
    "/platform/broker-groups/{bgroup}/edit/",
    "/platform/broker-groups/{bgroup}/",
    "/platform/broker-groups/{bgroup}/live/",
    "/platform/nodes/new/",
    "/platform/nodes/{node}/edit/",
    "/platform/nodes/{node}/delete/",
    "/platform/audit/",
    "/platform/jobs/",
    "/platform/jobs/{run}/report/",  # lists every tenant's figures: operators only
    "/platform/jobs/{run}/report/tenant_usage.png",
]


def _fill(url: str, p: Platform, seed: dict[str, Any]) -> str:
    return url.format(
        key=seed["key"].pk,
        acl=seed["acl"].pk,
        quota=seed["quota"].pk,
        viewer=seed["viewer"].pk,
        tenant=p.tenant.pk,
        plan=p.plan.pk,
        cluster=p.cluster.pk,
        bgroup=p.groups[0].pk,
        node=p.nodes[0].pk,
        group=seed["group"].pk,
        rule=seed["rule"].pk,
        run=seed["run"].pk,
    )


@pytest.mark.parametrize(("url", "readers"), PAGES, ids=[u for u, _ in PAGES])
@pytest.mark.parametrize("role", ROLES)
def test_tenant_page_by_role(
    platform: Platform, browser_for: Callable[..., Any], url: str, readers: set[str], role: str
) -> None:
    seed = _seed(platform)
    response = browser_for(role).get(_fill(url, platform, seed))
    if role == "operator" or role in readers:
        expected = 200
    elif role == "outsider":
        expected = 404  # another tenant: existence does not leak
    else:
        expected = 403
    assert response.status_code == expected, (role, url)


@pytest.mark.parametrize("url", [u for u, _ in PAGES] + PLATFORM_PAGES)
def test_anonymous_is_sent_to_sign_in(
    platform: Platform, browser_for: Callable[..., Any], url: str, tmp_path: Path
) -> None:
    response = browser_for(None).get(_fill(url, platform, _seed(platform, tmp_path)))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("url", PLATFORM_PAGES)
@pytest.mark.parametrize("role", ROLES)
def test_platform_pages_are_for_operators(
    platform: Platform, browser_for: Callable[..., Any], url: str, role: str, tmp_path: Path
) -> None:
    response = browser_for(role).get(_fill(url, platform, _seed(platform, tmp_path)))
    assert response.status_code == (200 if role == "operator" else 403), (role, url)


@dataclass
class Action:
    """A POST and how to tell that it took effect."""

    url: str
    data: dict[str, Any]
    writers: set[str]
    done: Callable[[Platform, dict[str, Any]], bool]
    extra: dict[str, Any] = field(default_factory=dict)


def _fake(p: Platform) -> Any:
    return get_gateway().fake_broker(p.nodes[0].endpoint)  # type: ignore[attr-defined]


ACTIONS = [
    Action(
        "/t/acme/topics/orders/send/",
        {"body": "ping", "tag": "t", "keys": "k1 k2"},
        BUILD,
        lambda p, s: any(m.body == b"ping" and m.keys == ("k1", "k2") for m in _fake(p).messages),
    ),
    Action(
        "/t/acme/groups/billing/reset/",
        {"topic": "orders", "to": "beginning", "confirm": "on"},
        BUILD,
        lambda p, s: AuditEvent.objects.filter(
            object_type="consumergroup", after__has_key="reset_offset"
        ).exists(),
    ),
    Action(
        "/t/acme/groups/billing/dlq/",
        {"message_ids": ["D1"]},
        BUILD,
        lambda p, s: _fake(p).dead_letters["acme%billing"] == [],
    ),
    Action(
        "/t/acme/topics/new/",
        {
            "name": "fresh",
            "message_type": "NORMAL",
            "queue_count": 4,
            "retention_hours": 72,
            "tiered_retention_hours": 0,
            "max_message_bytes": 1024,
        },
        BUILD,
        lambda p, s: Topic.objects.filter(name="fresh").exists(),
    ),
    Action(
        "/t/acme/topics/orders/edit/",
        {
            "description": "changed",
            "message_type": "NORMAL",
            "queue_count": 8,
            "retention_hours": 72,
            "tiered_retention_hours": 0,
            "max_message_bytes": 4194304,
        },
        BUILD,
        lambda p, s: Topic.objects.get(pk=s["topic"].pk).description == "changed",
    ),
    Action(
        "/t/acme/topics/orders/delete/",
        {},
        BUILD,
        lambda p, s: Topic.objects.filter(pk=s["topic"].pk, status="deleting").exists()
        or not Topic.objects.filter(pk=s["topic"].pk).exists(),
    ),
    Action(
        "/t/acme/groups/new/",
        {
            "name": "fresh-g",
            "max_delivery_attempts": 16,
            "retry_policy": "EXPONENTIAL",
            "retry_initial_backoff_ms": 1000,
            "retry_max_backoff_ms": 2000,
        },
        BUILD,
        lambda p, s: ConsumerGroup.objects.filter(name="fresh-g").exists(),
    ),
    Action(
        "/t/acme/groups/billing/delete/",
        {},
        BUILD,
        lambda p, s: not ConsumerGroup.objects.filter(pk=s["group"].pk, status="active").exists()
        and not ConsumerGroup.objects.filter(pk=s["group"].pk, status="provisioning").exists(),
    ),
    Action(
        "/t/acme/keys/new/",
        {"description": "ci"},
        MANAGE,
        lambda p, s: AccessKey.objects.filter(description="ci").exists(),
    ),
    Action(
        "/t/acme/keys/{key}/rotate/",
        {"overlap_hours": 1},
        MANAGE,
        lambda p, s: AccessKey.objects.filter(rotated_from=s["key"]).exists(),
    ),
    Action(
        "/t/acme/keys/{key}/revoke/",
        {},
        MANAGE,
        lambda p, s: AccessKey.objects.get(pk=s["key"].pk).key_status == "revoked",
    ),
    Action(
        "/t/acme/acls/new/",
        {
            "principal": "*",
            "resource_type": "Group",
            "resource_pattern": "LITERAL",
            "resource_name": "g",
            "actions": ["Sub"],
            "source_cidrs": "10.0.0.0/8",
            "decision": "Allow",
        },
        MANAGE,
        lambda p, s: AclPolicy.objects.filter(resource_type="Group", source_cidrs=["10.0.0.0/8"]).exists(),
    ),
    Action(
        "/t/acme/acls/{acl}/delete/",
        {},
        MANAGE,
        lambda p, s: not AclPolicy.objects.filter(pk=s["acl"].pk).exclude(status="deleting").exists(),
    ),
    Action(
        "/t/acme/quotas/new/",
        {"group": "{group}", "consume_messages_per_s": 5},
        set(),
        lambda p, s: Quota.objects.filter(group=s["group"]).exists(),
    ),
    Action(
        "/t/acme/quotas/{quota}/edit/",
        {"produce_messages_per_s": 77},
        set(),
        lambda p, s: Quota.objects.get(pk=s["quota"].pk).produce_messages_per_s == 77,
    ),
    Action(
        "/t/acme/members/",
        {"username": "outsider", "role": "viewer"},
        MANAGE,
        lambda p, s: Membership.objects.filter(tenant=p.tenant, user=p.users["outsider"]).exists(),
    ),
    Action(
        "/t/acme/members/{viewer}/role/",
        {"role": "developer"},
        MANAGE,
        lambda p, s: Membership.objects.get(pk=s["viewer"].pk).role == "developer",
    ),
    Action(
        "/t/acme/members/{viewer}/remove/",
        {},
        MANAGE,
        lambda p, s: not Membership.objects.filter(pk=s["viewer"].pk).exists(),
    ),
    Action(
        "/t/acme/settings/",
        {"name": "Acme Corp"},
        MANAGE,
        lambda p, s: type(p.tenant).objects.get(pk=p.tenant.pk).name == "Acme Corp",
    ),
    Action(
        "/t/acme/alerts/new/",
        {
            "name": "slow",
            "group": "{group}",
            "lag_threshold": 10,
            "channel": "email",
            "email": "a@example.com",
        },
        BUILD,
        lambda p, s: AlertRule.objects.filter(name="slow", lag_threshold=10).exists(),
    ),
    Action(
        "/t/acme/alerts/{rule}/edit/",
        {
            "name": "watch",
            "group": "{group}",
            "lag_threshold": 99,
            "channel": "email",
            "email": "oncall@example.com",
            "enabled": "on",
        },
        BUILD,
        lambda p, s: AlertRule.objects.get(pk=s["rule"].pk).lag_threshold == 99,
    ),
    Action(
        "/t/acme/alerts/{rule}/delete/",
        {},
        BUILD,
        lambda p, s: not AlertRule.objects.filter(pk=s["rule"].pk).exists(),
    ),
    Action(
        "/t/acme/alerts/{rule}/secret/rotate/",
        {},
        BUILD,
        lambda p, s: AuditEvent.objects.filter(object_type="alertrule", action="rotate").exists(),
    ),
    Action(
        "/t/acme/alerts/{rule}/test/",
        {},
        BUILD,
        lambda p, s: [m.to for m in mail.outbox] == [["oncall@example.com"]],
    ),
]


@pytest.mark.parametrize("action", ACTIONS, ids=[a.url for a in ACTIONS])
@pytest.mark.parametrize("role", ROLES)
def test_tenant_action_by_role(
    platform: Platform, browser_for: Callable[..., Any], action: Action, role: str
) -> None:
    # given
    seed = _seed(platform)
    data = {
        k: (v.format(group=seed["group"].pk, rule=seed["rule"].pk) if isinstance(v, str) and "{" in v else v)
        for k, v in action.data.items()
    }
    # when
    response = browser_for(role).post(_fill(action.url, platform, seed), data)
    # then
    allowed = role == "operator" or role in action.writers
    if allowed:
        assert response.status_code in (200, 302), (role, response.content[:2000])
        assert action.done(platform, seed), (role, action.url)
    else:
        assert response.status_code == (404 if role == "outsider" else 403), role
        assert not action.done(platform, seed), (role, action.url)


PLATFORM_ACTIONS = [
    (
        "/platform/tenants/new/",
        {"name": "Initech", "namespace": "initech", "status": "active", "owner": "viewer"},
        lambda p: p.tenant.__class__.objects.filter(namespace="initech").exists(),
    ),
    (
        "/platform/plans/new/",
        {
            "name": "gold",
            "produce_messages_per_s": 1,
            "produce_bytes_per_s": 1,
            "consume_messages_per_s": 1,
            "consume_bytes_per_s": 1,
            "storage_bytes": 1,
            "max_topics": 1,
            "max_groups": 1,
            "max_message_bytes": 1,
            "max_connections": 1,
            "currency": "USD",
            "price_monthly": "1",
            "price_per_million_requests": "0",
            "price_per_gb_in": "0",
            "price_per_gb_out": "0",
            "price_per_gb_month": "0",
            "price_per_topic_day": "0",
        },
        lambda p: Plan.objects.filter(name="gold").exists(),
    ),
    (
        "/platform/clusters/new/",
        {"name": "c2"},
        lambda p: p.cluster.__class__.objects.filter(name="c2").exists(),
    ),
]


@pytest.mark.parametrize(("url", "data", "done"), PLATFORM_ACTIONS, ids=[a[0] for a in PLATFORM_ACTIONS])
@pytest.mark.parametrize("role", ROLES)
def test_platform_action_by_role(
    platform: Platform,
    browser_for: Callable[..., Any],
    url: str,
    data: dict[str, Any],
    done: Callable[[Platform], bool],
    role: str,
) -> None:
    response = browser_for(role).post(url, data)
    if role == "operator":
        assert response.status_code == 302, response.content[:3000]
        assert done(platform)
    else:
        assert response.status_code == 403
        assert not done(platform)
