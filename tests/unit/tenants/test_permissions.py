"""The permission matrix: every role x every endpoint x every method.

Operators manage everything; owners/admins manage their tenant; developers manage topics and
groups; viewers read; a member of another tenant gets 404 for objects (existence never leaks) and
400 when naming a tenant it cannot see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tenants.choices import MembershipRole
from tenants.models import (
    AccessKey,
    AclPolicy,
    AuditEvent,
    ConsumerGroup,
    Invoice,
    LagDaily,
    Membership,
    Quota,
    Topic,
    UsageDaily,
)
from tenants.services import access_keys
from tenants.services.audit import Actor, record_event

from .conftest import ROLES, Platform

MANAGE = {"owner", "admin"}
BUILD = MANAGE | {"developer"}
MEMBERS = {"owner", "admin", "developer", "viewer"}


@dataclass(frozen=True)
class Endpoint:
    url: str
    make: Callable[[Platform], Any]
    create: Callable[[Platform], dict[str, Any]] | None
    patch: dict[str, Any] | None
    writers: set[str]  # besides the operator
    readers: set[str] = frozenset(MEMBERS)  # type: ignore[assignment]
    delete_status: int = 202
    tenant_scoped: bool = True
    operator_only: frozenset[str] = frozenset()  # methods only operators may use


def _topic(p: Platform) -> Topic:
    return Topic.objects.create(tenant=p.tenant, name="orders")


def _group(p: Platform) -> ConsumerGroup:
    return ConsumerGroup.objects.create(tenant=p.tenant, name="billing")


def _key(p: Platform) -> AccessKey:
    return access_keys.create_access_key(Actor(), p.tenant)[0]


def _acl(p: Platform) -> AclPolicy:
    return AclPolicy.objects.create(tenant=p.tenant, principal="*", resource_type="Topic", actions=["Pub"])


def _usage(p: Platform) -> UsageDaily:
    return UsageDaily.objects.create(tenant=p.tenant, namespace="acme", date=date(2025, 3, 1), bytes_in=1)


def _invoice(p: Platform) -> Invoice:
    return Invoice.objects.create(
        tenant=p.tenant, namespace="acme", period_start=date(2025, 3, 1), period_end=date(2025, 3, 31)
    )


def _lag(p: Platform) -> LagDaily:
    return LagDaily.objects.create(tenant=p.tenant, namespace="acme", group_name="g", date=date(2025, 3, 1))


def _quota(p: Platform) -> Quota:
    return Quota.objects.create(tenant=p.tenant, topic=_topic(p), produce_messages_per_s=10)


def _membership(p: Platform) -> Membership:
    extra = get_user_model().objects.create_user("extra")
    return Membership.objects.create(user=extra, tenant=p.tenant, role=MembershipRole.DEVELOPER)


def _new_member(p: Platform) -> dict[str, Any]:
    get_user_model().objects.create_user("newcomer")
    return {"tenant": p.tenant.pk, "user": "newcomer", "role": "viewer"}


def _event(p: Platform) -> AuditEvent:
    return record_event(Actor(), "update", p.tenant)  # type: ignore[arg-type]


ENDPOINTS = {
    "tenants": Endpoint(
        "/api/v1/tenants/",
        lambda p: p.tenant,
        lambda p: {"name": "New", "namespace": "newco"},
        {"name": "Renamed"},
        writers=MANAGE,
        delete_status=204,
        operator_only=frozenset({"create", "delete"}),
    ),
    "memberships": Endpoint(
        "/api/v1/memberships/", _membership, _new_member, {"role": "viewer"}, MANAGE, delete_status=204
    ),
    "access-keys": Endpoint(
        "/api/v1/access-keys/",
        _key,
        lambda p: {"tenant": p.tenant.pk, "description": "ci"},
        {"description": "x"},
        MANAGE,
    ),
    "topics": Endpoint(
        "/api/v1/topics/",
        _topic,
        lambda p: {"tenant": p.tenant.pk, "name": "payments"},
        {"description": "x"},
        BUILD,
    ),
    "consumer-groups": Endpoint(
        "/api/v1/consumer-groups/",
        _group,
        lambda p: {"tenant": p.tenant.pk, "name": "audit"},
        {"fifo": True},
        BUILD,
    ),
    "acl-policies": Endpoint(
        "/api/v1/acl-policies/",
        _acl,
        lambda p: {"tenant": p.tenant.pk, "principal": "*", "resource_type": "Group", "actions": ["Sub"]},
        {"actions": ["Pub", "Sub"]},
        MANAGE,
    ),
    "quotas": Endpoint(
        "/api/v1/quotas/",
        _quota,
        lambda p: {"tenant": p.tenant.pk, "max_topics": 5},
        {"max_topics": 9},
        set(),
    ),
    "plans": Endpoint(
        "/api/v1/plans/",
        lambda p: p.plan,
        lambda p: {"name": "gold"},
        {"display_name": "Std"},
        set(),
        readers=set(ROLES),
        delete_status=409,
        tenant_scoped=False,  # tenants are on the plan
    ),
    "broker-clusters": Endpoint(
        "/api/v1/broker-clusters/",
        lambda p: p.cluster,
        lambda p: {"name": "c2"},
        {"description": "x"},
        set(),
        readers=set(),
        delete_status=409,
        tenant_scoped=False,
    ),
    "broker-groups": Endpoint(
        "/api/v1/broker-groups/",
        lambda p: p.groups[0],
        lambda p: {"cluster": p.cluster.pk, "name": "broker-d"},
        {"name": "broker-z"},
        set(),
        readers=set(),
        delete_status=204,
        tenant_scoped=False,
    ),
    "broker-nodes": Endpoint(
        "/api/v1/broker-nodes/",
        lambda p: p.nodes[0],
        lambda p: {"group": p.groups[0].pk, "name": "n9", "broker_id": 1, "endpoint": "127.0.0.1:9999"},
        {"enabled": False},
        set(),
        readers=set(),
        delete_status=204,
        tenant_scoped=False,
    ),
    "audit-events": Endpoint("/api/v1/audit-events/", _event, None, None, set()),
    # analytics results: read-only, loaded by the nightly jobs
    "usage-daily": Endpoint("/api/v1/usage-daily/", _usage, None, None, set()),
    "invoices": Endpoint("/api/v1/invoices/", _invoice, None, None, set()),
    "lag-daily": Endpoint("/api/v1/lag-daily/", _lag, None, None, set()),
}


def _expected(ep: Endpoint, role: str, method: str) -> int:
    is_op = role == "operator"
    if method in ep.operator_only and not is_op:
        return 404 if method == "delete" and role == "outsider" else 403
    if method == "list":
        if not ep.tenant_scoped and not (is_op or role in ep.readers):
            return 403
        return 200
    if method == "create":
        if ep.create is None:
            return 405
        if is_op or role in ep.writers:
            return 201
        if ep.tenant_scoped and role == "outsider":
            return 400  # the tenant id does not exist for them
        return 403
    visible = is_op or role in ep.readers
    if method in ("patch", "delete") and ep.patch is None:
        return 405
    if not visible:
        return 404 if ep.tenant_scoped else 403
    if method == "retrieve":
        return 200
    if not (is_op or role in ep.writers):
        return 403
    return 200 if method == "patch" else ep.delete_status


CASES = [
    pytest.param(name, role, method, id=f"{name}-{method}-{role}")
    for name in ENDPOINTS
    for method in ("list", "retrieve", "create", "patch", "delete")
    for role in ROLES
]


@pytest.mark.parametrize(("name", "role", "method"), CASES)
def test_permission_matrix(platform: Platform, name: str, role: str, method: str) -> None:
    ep = ENDPOINTS[name]
    obj = ep.make(platform)
    client = platform.client(role)
    detail = f"{ep.url}{obj.pk}/"
    if method == "list":
        response = client.get(ep.url)
    elif method == "retrieve":
        response = client.get(detail)
    elif method == "create":
        response = client.post(ep.url, ep.create(platform) if ep.create else {}, format="json")
    elif method == "patch":
        response = client.patch(detail, ep.patch or {}, format="json")
    else:
        response = client.delete(detail)
    assert response.status_code == _expected(ep, role, method), response.content
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"code", "message", "fields"}


@pytest.mark.parametrize("role", [r for r in ROLES if r != "operator"])
def test_members_list_only_their_tenants_objects(platform: Platform, role: str) -> None:
    Topic.objects.create(tenant=platform.tenant, name="mine")
    Topic.objects.create(tenant=platform.other, name="theirs")
    names = {t["name"] for t in platform.client(role).get("/api/v1/topics/").json()["results"]}
    assert names == ({"theirs"} if role == "outsider" else {"mine"})


def test_anonymous_gets_401(platform: Platform) -> None:
    response = platform.client(None).get("/api/v1/topics/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
