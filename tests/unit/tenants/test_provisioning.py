"""The provisioning state machine and the reconcile loop, against in-memory brokers."""

from __future__ import annotations

from typing import Any

import pytest

from tenants.choices import ProvisioningStatus
from tenants.errors import BrokerUnavailable
from tenants.models import BrokerGroup, BrokerNode, ConsumerGroup, Topic, TopicPlacement
from tenants.services import groups, topics
from tenants.services.audit import Actor
from tenants.services.gateway import InMemoryBrokerGateway, TopicSpec
from tenants.services.placement import spread_queues
from tenants.services.provisioning import ResourceKind, provision, reconcile_brokers
from tenants.tasks import reconcile_node_task

from .conftest import Platform

SYSTEM = Actor()


@pytest.mark.parametrize(
    ("queues", "groups_", "expected"),
    [
        pytest.param(8, [1, 2, 3], {1: 3, 2: 3, 3: 2}, id="8-over-3"),
        pytest.param(2, [1, 2, 3], {1: 1, 2: 1}, id="fewer-queues-than-groups"),
        pytest.param(4, [7], {7: 4}, id="one-group"),
        pytest.param(4, [], {}, id="no-groups"),
    ],
)
def test_spread_queues(queues: int, groups_: list[int], expected: dict[int, int]) -> None:
    assert spread_queues(queues, groups_) == expected


def test_create_topic_places_queues_and_provisions_every_group(
    platform: Platform, gateway: InMemoryBrokerGateway, django_capture_on_commit_callbacks: Any
) -> None:
    # when
    with django_capture_on_commit_callbacks(execute=True):
        topic = topics.create_topic(SYSTEM, platform.tenant, name="orders", queue_count=8)
    # then
    topic.refresh_from_db()
    assert topic.status == ProvisioningStatus.ACTIVE
    assert topic.applied_generation == topic.generation == 1
    placed = sorted(TopicPlacement.objects.filter(topic=topic).values_list("queue_count", flat=True))
    assert placed == [2, 3, 3]
    counts = sorted(gateway.topics[n.endpoint]["acme%orders"].queue_count for n in platform.nodes)
    assert counts == [2, 3, 3]


def test_new_topics_go_to_the_least_loaded_groups(platform: Platform, gateway: InMemoryBrokerGateway) -> None:
    topics.create_topic(SYSTEM, platform.tenant, name="a", queue_count=1)
    topics.create_topic(SYSTEM, platform.tenant, name="b", queue_count=1)
    topics.create_topic(SYSTEM, platform.tenant, name="c", queue_count=1)
    used = set(TopicPlacement.objects.values_list("broker_group_id", flat=True))
    assert used == {g.pk for g in platform.groups}


def test_unreachable_broker_marks_error_with_reason_then_recovers(
    platform: Platform, gateway: InMemoryBrokerGateway
) -> None:
    # given
    topic = topics.create_topic(SYSTEM, platform.tenant, name="orders", queue_count=3)
    gateway.down.add(platform.nodes[1].endpoint)
    # when
    with pytest.raises(BrokerUnavailable):
        provision(ResourceKind.TOPIC, topic.pk)
    # then
    topic.refresh_from_db()
    assert topic.status == ProvisioningStatus.ERROR
    assert platform.nodes[1].endpoint in topic.status_message
    # when the broker is back, the reconcile pass retries
    gateway.down.clear()
    reconcile_brokers()
    topic.refresh_from_db()
    assert (topic.status, topic.status_message) == (ProvisioningStatus.ACTIVE, "")


def test_task_retries_then_gives_up_and_leaves_error(
    platform: Platform, gateway: InMemoryBrokerGateway, django_capture_on_commit_callbacks: Any
) -> None:
    gateway.down.add(platform.nodes[0].endpoint)
    with django_capture_on_commit_callbacks(execute=True):
        topic = topics.create_topic(SYSTEM, platform.tenant, name="orders")
    topic.refresh_from_db()
    assert topic.status == ProvisioningStatus.ERROR
    attempts = [c for c in gateway.calls if c == ("upsert_topic", platform.nodes[0].endpoint)]
    assert len(attempts) > 1  # retried


def test_stale_apply_does_not_mark_a_newer_change_active(
    platform: Platform, gateway: InMemoryBrokerGateway
) -> None:
    topic = topics.create_topic(SYSTEM, platform.tenant, name="orders")

    class Racing(InMemoryBrokerGateway):
        def upsert_topic(self, endpoint: str, spec: TopicSpec) -> None:
            super().upsert_topic(endpoint, spec)
            Topic.objects.filter(pk=topic.pk).update(generation=5)  # an edit lands mid-apply

    provision(ResourceKind.TOPIC, topic.pk, Racing())
    topic.refresh_from_db()
    assert topic.status == ProvisioningStatus.PROVISIONING
    assert topic.applied_generation == 0


def test_delete_removes_from_brokers_then_the_row(
    platform: Platform, gateway: InMemoryBrokerGateway, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        topic = topics.create_topic(SYSTEM, platform.tenant, name="orders")
    with django_capture_on_commit_callbacks(execute=True):
        topics.delete_topic(SYSTEM, topic)
    assert not Topic.objects.filter(pk=topic.pk).exists()
    assert all("acme%orders" not in gateway.topics.get(n.endpoint, {}) for n in platform.nodes)


def test_provision_is_idempotent(platform: Platform, gateway: InMemoryBrokerGateway) -> None:
    group = groups.create_group(SYSTEM, platform.tenant, name="billing", fifo=True)
    provision(ResourceKind.CONSUMER_GROUP, group.pk)
    first = {n: dict(v) for n, v in gateway.groups.items()}
    provision(ResourceKind.CONSUMER_GROUP, group.pk)
    assert gateway.groups == first
    assert provision(ResourceKind.CONSUMER_GROUP, 10**9) == "gone"


def test_reconcile_restores_a_broker_rebuilt_empty_and_removes_strays(
    platform: Platform,
    gateway: InMemoryBrokerGateway,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # given
    with django_capture_on_commit_callbacks(execute=True):
        topics.create_topic(SYSTEM, platform.tenant, name="orders", queue_count=3)
        groups.create_group(SYSTEM, platform.tenant, name="billing")
    node = platform.nodes[0]
    gateway.wipe(node.endpoint)
    gateway.upsert_topic(node.endpoint, TopicSpec("acme%ghost", 1, "NORMAL"))
    gateway.upsert_topic(node.endpoint, TopicSpec("%RETRY%acme%billing", 1, "NORMAL"))
    # when
    with caplog.at_level("INFO", logger="tenants.services.provisioning"):
        report = reconcile_brokers()
    # then
    assert gateway.topics[node.endpoint]["acme%orders"].queue_count == 1
    # the log names what was repaired and removed, for an operator to trace the drift
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("reconcile:"))
    assert f"{node.name}:topic:acme%orders" in line.partition("repaired: ")[2], line
    assert f"removed: {node.name}:topic:acme%ghost" in line, line
    assert "acme%billing" in gateway.groups[node.endpoint]
    assert "acme%ghost" not in gateway.topics[node.endpoint]
    assert "%RETRY%acme%billing" in gateway.topics[node.endpoint]  # not ours to manage
    assert report.nodes_ok == 3
    assert any("acme%orders" in r for r in report.repaired)
    assert BrokerNode.objects.get(pk=node.pk).health == "healthy"


def test_a_single_node_s_reconcile_names_what_it_repaired(
    platform: Platform, gateway: InMemoryBrokerGateway, caplog: pytest.LogCaptureFixture
) -> None:
    # given: a node registered (or re-enabled) after it lost a topic
    topic = topics.create_topic(SYSTEM, platform.tenant, name="orders", queue_count=3)
    provision(ResourceKind.TOPIC, topic.pk)
    node = platform.nodes[1]
    gateway.wipe(node.endpoint)
    # when: its own reconcile runs (the task a registration enqueues)
    with caplog.at_level("INFO", logger="tenants.tasks"):
        assert reconcile_node_task(node.pk) == 1
    # then: it repaired the node and said so, as the periodic pass does
    assert "acme%orders" in gateway.topics[node.endpoint]
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("reconcile of "))
    assert line.startswith(f"reconcile of {node.name}: 1 nodes ok, 0 unreachable, "), line
    assert f"repaired: {node.name}:topic:acme%orders" in line, line


def test_reconcile_marks_unreachable_nodes(platform: Platform, gateway: InMemoryBrokerGateway) -> None:
    gateway.down.add(platform.nodes[2].endpoint)
    report = reconcile_brokers()
    assert report.nodes_unreachable == 1
    node = BrokerNode.objects.get(pk=platform.nodes[2].pk)
    assert node.health == "unreachable"
    assert "unreachable" in node.health_message


def test_queue_count_change_respreads(platform: Platform, gateway: InMemoryBrokerGateway) -> None:
    topic = topics.create_topic(SYSTEM, platform.tenant, name="orders", queue_count=3)
    provision(ResourceKind.TOPIC, topic.pk)
    topics.update_topic(SYSTEM, topic, queue_count=1)
    provision(ResourceKind.TOPIC, topic.pk)
    holders = [n for n in platform.nodes if "acme%orders" in gateway.topics.get(n.endpoint, {})]
    assert len(holders) == 1
    assert TopicPlacement.objects.get(topic=topic).queue_count == 1


def test_no_cluster_means_error_not_crash(platform: Platform, gateway: InMemoryBrokerGateway) -> None:
    BrokerNode.objects.all().delete()
    BrokerGroup.objects.all().delete()
    group = groups.create_group(SYSTEM, platform.tenant, name="billing")
    with pytest.raises(BrokerUnavailable):
        provision(ResourceKind.CONSUMER_GROUP, group.pk)
    assert ConsumerGroup.objects.get(pk=group.pk).status == ProvisioningStatus.ERROR
