"""Provisioning and reconcile of access keys, ACL policies and quotas, against in-memory brokers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tenants.choices import ProvisioningStatus
from tenants.errors import BrokerUnavailable
from tenants.models import AccessKey, AclPolicy, BrokerCluster, BrokerGroup, BrokerNode, Quota
from tenants.services import access_keys, acls, quotas, tenants, topics
from tenants.services.audit import Actor
from tenants.services.gateway import AccessKeySpec, AclSpec, InMemoryBrokerGateway, QuotaSpec
from tenants.services.limits import effective_limits
from tenants.services.provisioning import ResourceKind, provision, reconcile_brokers

from .conftest import Platform

SYSTEM = Actor()


@pytest.fixture
def secured(
    platform: Platform, gateway: InMemoryBrokerGateway, django_capture_on_commit_callbacks: Any
) -> dict[str, Any]:
    """A tenant with a topic, a key, an ACL on it, a tenant quota and a topic override, all applied."""
    with django_capture_on_commit_callbacks(execute=True):
        topic = topics.create_topic(SYSTEM, platform.tenant, name="orders", queue_count=3)
        key, secret = access_keys.create_access_key(SYSTEM, platform.tenant)
        policy = acls.create_acl(
            SYSTEM,
            platform.tenant,
            principal=key.access_key,
            resource_type="Topic",
            resource_pattern="LITERAL",
            resource_name="orders",
            actions=["Pub", "Sub"],
            source_cidrs=["10.1.2.3/8"],
        )
        tenant_quota = quotas.create_quota(SYSTEM, platform.tenant, produce_messages_per_s=50)
        topic_quota = quotas.create_quota(SYSTEM, platform.tenant, topic=topic, consume_bytes_per_s=7)
    return {
        "key": key,
        "secret": secret,
        "policy": policy,
        "tenant_quota": tenant_quota,
        "topic_quota": topic_quota,
    }


def test_keys_acls_and_quotas_reach_every_node_of_the_tenant(
    platform: Platform, gateway: InMemoryBrokerGateway, secured: dict[str, Any]
) -> None:
    key, policy = secured["key"], secured["policy"]
    for node in platform.nodes:
        held = gateway.access_keys[node.endpoint][key.access_key]
        assert (held.namespace, held.secret, held.expires_at_ms) == ("acme", secured["secret"], 0)
        acl = gateway.acls[node.endpoint][("acme", str(policy.pk))]
        assert acl.source_cidrs == ("10.0.0.0/8",) and acl.resource_name == "orders"
        tenant_limits = gateway.quotas[node.endpoint][("acme", "tenant", "")].limits
        assert tenant_limits["produce_messages_per_s"] == 50 and tenant_limits["max_topics"] == 100
        assert gateway.quotas[node.endpoint][("acme", "topic", "acme%orders")].limits == {
            "consume_bytes_per_s": 7
        }
    for obj in (key, policy, secured["tenant_quota"], secured["topic_quota"]):
        obj.refresh_from_db()
        assert obj.status == ProvisioningStatus.ACTIVE


def test_a_key_in_its_rotation_overlap_carries_its_expiry(
    platform: Platform, gateway: InMemoryBrokerGateway, secured: dict[str, Any]
) -> None:
    key = secured["key"]
    expires = timezone.now() + timedelta(hours=1)
    AccessKey.objects.filter(pk=key.pk).update(expires_at=expires)
    provision(ResourceKind.ACCESS_KEY, key.pk)
    held = gateway.access_keys[platform.nodes[0].endpoint][key.access_key]
    assert held.expires_at_ms == int(expires.timestamp() * 1000)


@pytest.mark.parametrize("kind", [ResourceKind.ACCESS_KEY, ResourceKind.ACL_POLICY, ResourceKind.QUOTA])
def test_broker_failure_marks_the_row_error_with_the_reason(
    platform: Platform, gateway: InMemoryBrokerGateway, secured: dict[str, Any], kind: ResourceKind
) -> None:
    row = {
        ResourceKind.ACCESS_KEY: "key",
        ResourceKind.ACL_POLICY: "policy",
        ResourceKind.QUOTA: "topic_quota",
    }
    obj = secured[row[kind]]
    gateway.down.add(platform.nodes[2].endpoint)
    with pytest.raises(BrokerUnavailable):
        provision(kind, obj.pk)
    obj.refresh_from_db()
    assert obj.status == ProvisioningStatus.ERROR
    assert platform.nodes[2].endpoint in obj.status_message


def test_deleting_a_tenant_quota_pushes_the_plan_limits_back(
    platform: Platform,
    gateway: InMemoryBrokerGateway,
    secured: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        quotas.delete_quota(SYSTEM, secured["tenant_quota"])
    assert not Quota.objects.filter(pk=secured["tenant_quota"].pk).exists()
    pushed = gateway.quotas[platform.nodes[0].endpoint][("acme", "tenant", "")].limits
    assert pushed["produce_messages_per_s"] == platform.plan.produce_messages_per_s


def test_reconcile_restores_security_config_on_a_broker_rebuilt_empty(
    platform: Platform, gateway: InMemoryBrokerGateway, secured: dict[str, Any]
) -> None:
    # given
    node = platform.nodes[1]
    expected = (
        dict(gateway.access_keys[node.endpoint]),
        dict(gateway.acls[node.endpoint]),
        dict(gateway.quotas[node.endpoint]),
    )
    gateway.wipe(node.endpoint)
    # when
    report = reconcile_brokers()
    # then
    restored_quotas = {k: v for k, v in gateway.quotas[node.endpoint].items() if k[0] == "acme"}
    assert (gateway.access_keys[node.endpoint], gateway.acls[node.endpoint], restored_quotas) == expected
    # globex has nothing yet, but c1 is its home cluster: its plan limits are there for its first topic
    assert ("globex", "tenant", "") in gateway.quotas[node.endpoint]
    assert f"{node.name}:access_key:{secured['key'].access_key}" in report.repaired
    # a second pass finds nothing to do
    gateway.calls.clear()
    again = reconcile_brokers()
    assert again.repaired == [] and again.removed == []
    assert not [c for c in gateway.calls if c[0].startswith(("put_", "delete_"))]


def test_reconcile_repairs_drift_and_removes_extras_in_tenant_namespaces(
    platform: Platform, gateway: InMemoryBrokerGateway, secured: dict[str, Any]
) -> None:
    # given: a tampered secret and limit, plus objects nobody asked for
    ep = platform.nodes[0].endpoint
    key = secured["key"]
    gateway.access_keys[ep][key.access_key] = AccessKeySpec("acme", key.access_key, "tampered")
    gateway.quotas[ep][("acme", "tenant", "")] = QuotaSpec("acme", "tenant", "", {"max_topics": 1})
    gateway.put_access_key(ep, AccessKeySpec("acme", "AKSTALE", "x"))
    gateway.put_acl(ep, AclSpec("acme", "999", "*", "Topic", "LITERAL", "", ("Pub",), (), "Allow"))
    gateway.put_quota(ep, QuotaSpec("acme", "group", "acme%gone", {"max_connections": 1}))
    gateway.put_access_key(ep, AccessKeySpec("Ops.Internal", "AKOPS", "x"))  # not a tenant namespace
    # when
    report = reconcile_brokers()
    # then
    assert gateway.access_keys[ep][key.access_key].secret == secured["secret"]
    assert gateway.quotas[ep][("acme", "tenant", "")].limits["max_topics"] == 100
    assert "AKSTALE" not in gateway.access_keys[ep]
    assert ("acme", "999") not in gateway.acls[ep]
    assert ("acme", "group", "acme%gone") not in gateway.quotas[ep]
    assert "AKOPS" in gateway.access_keys[ep]
    assert len(report.removed) == 3


def test_revoked_and_expired_keys_are_removed_from_brokers(
    platform: Platform,
    gateway: InMemoryBrokerGateway,
    secured: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    key = secured["key"]
    # an expired key that is still marked active is dropped by the very next reconcile
    AccessKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        reconcile_brokers()
    assert all(key.access_key not in gateway.access_keys.get(n.endpoint, {}) for n in platform.nodes)
    assert AccessKey.objects.get(pk=key.pk).key_status == "revoked"


def test_deleting_an_acl_removes_it_everywhere(
    platform: Platform,
    gateway: InMemoryBrokerGateway,
    secured: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    policy = secured["policy"]
    with django_capture_on_commit_callbacks(execute=True):
        acls.delete_acl(SYSTEM, policy)
    assert not AclPolicy.objects.filter(pk=policy.pk).exists()
    assert all(("acme", str(policy.pk)) not in gateway.acls[n.endpoint] for n in platform.nodes)


def test_a_new_tenant_s_plan_limits_reach_the_brokers_at_once(
    platform: Platform, gateway: InMemoryBrokerGateway, django_capture_on_commit_callbacks: Any
) -> None:
    # A namespace with no quota on a broker is not limited there: the plan's limits must not wait
    # for the next reconcile (a soak run's first reconcile found the second tenant's missing).
    with django_capture_on_commit_callbacks(execute=True):
        tenant = tenants.create_tenant(SYSTEM, name="Initech", namespace="initech")
    for node in platform.nodes:
        limits = gateway.quotas[node.endpoint][("initech", "tenant", "")].limits
        assert limits == effective_limits(tenant)
    assert not [item for item in reconcile_brokers().repaired if "initech" in item]


def test_a_tenant_moved_to_another_cluster_takes_its_limits_there(
    platform: Platform, gateway: InMemoryBrokerGateway, django_capture_on_commit_callbacks: Any
) -> None:
    cluster = BrokerCluster.objects.create(name="second")
    group = BrokerGroup.objects.create(cluster=cluster, name="second-a")
    node = BrokerNode.objects.create(group=group, name="second-a-0", endpoint="10.9.9.9:8081")
    with django_capture_on_commit_callbacks(execute=True):
        tenants.update_tenant(SYSTEM, platform.tenant, cluster=cluster)
    assert ("acme", "tenant", "") in gateway.quotas[node.endpoint]
