"""Fixtures of the control-plane tests: a platform with one cluster, two tenants and a user per role."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tenants.choices import MembershipRole
from tenants.models import BrokerCluster, BrokerGroup, BrokerNode, Membership, Plan, Tenant
from tenants.services.gateway import InMemoryBrokerGateway
from tenants.services.provisioning import set_gateway

ROLES = ("operator", "owner", "admin", "developer", "viewer", "outsider")


@pytest.fixture(autouse=True, scope="session")
def _static_root() -> None:
    # WhiteNoise warns (an error under filterwarnings) when STATIC_ROOT is missing on a fresh checkout.
    from django.conf import settings

    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)


@pytest.fixture(autouse=True)
def gateway() -> Iterator[InMemoryBrokerGateway]:
    """Every test talks to in-memory brokers unless it swaps in a real gateway."""
    fake = InMemoryBrokerGateway()
    set_gateway(fake)
    yield fake
    set_gateway(None)


@dataclass
class Platform:
    plan: Plan
    cluster: BrokerCluster
    groups: list[BrokerGroup]
    nodes: list[BrokerNode]
    tenant: Tenant
    other: Tenant
    users: dict[str, Any]

    def client(self, role: str | None) -> APIClient:
        client = APIClient()
        if role is not None:
            client.force_authenticate(self.users[role])
        return client


@pytest.fixture
def platform(db: None) -> Platform:
    user_model = get_user_model()
    plan = Plan.objects.create(name="standard", is_default=True, max_topics=100, max_groups=100)
    cluster = BrokerCluster.objects.create(name="c1", is_default=True)
    groups = [BrokerGroup.objects.create(cluster=cluster, name=f"broker-{c}") for c in "abc"]
    nodes = [
        BrokerNode.objects.create(group=g, name=f"{g.name}-0", endpoint=f"127.0.0.1:{9000 + i}")
        for i, g in enumerate(groups)
    ]
    tenant = Tenant.objects.create(name="Acme", namespace="acme", plan=plan)
    other = Tenant.objects.create(name="Globex", namespace="globex", plan=plan)
    users: dict[str, Any] = {
        "operator": user_model.objects.create_user("op", is_staff=True),
    }
    for role in ("owner", "admin", "developer", "viewer"):
        users[role] = user_model.objects.create_user(role)
        Membership.objects.create(user=users[role], tenant=tenant, role=MembershipRole(role))
    users["outsider"] = user_model.objects.create_user("outsider")
    Membership.objects.create(user=users["outsider"], tenant=other, role=MembershipRole.OWNER)
    return Platform(plan, cluster, groups, nodes, tenant, other, users)
