"""The operators' broker group page over real processes: an HA group (controller + master + replica,
tiered storage on) and a standalone broker, each node asked for its HA and tiered-storage state."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tenants.models import BrokerCluster, BrokerGroup, BrokerNode
from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess
from tests.integration.ha.cluster import HACluster

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db]

TIER_ON = {
    "MQ_BROKER_TIER_ENABLED": "true",
    "MQ_BROKER_TIER_INTERVAL_MS": "200",
    "MQ_BROKER_HA_IN_SYNC_TIMEOUT_MS": "1000",
}


@pytest.fixture
def ha_group(tmp_path: Path) -> Iterator[HACluster]:
    group = HACluster(tmp_path, size=2, env=TIER_ON)
    try:
        group.start()
        yield group
    finally:
        group.close()


@pytest.fixture
def operator() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_user("op", is_staff=True))
    return client


def _row(html: str, table: str, node: str) -> str:
    body = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    match = re.search(rf'<tr data-node="{node}">(.*?)</tr>', body, re.S)
    assert match, f"no row for {node} in {table}:\n{body}"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", match.group(1)))


def test_ha_group_shows_roles_epoch_sync_state_set_and_tier(ha_group: HACluster, operator: Client) -> None:
    # given: the group registered, plus a node that is registered but not running
    master = ha_group.wait_in_sync(2)
    replica = next(n for n in ha_group.nodes if n is not master)
    cluster = BrokerCluster.objects.create(name="local", is_default=True)
    group = BrokerGroup.objects.create(cluster=cluster, name="group-a")
    for broker_id, name, endpoint in (
        (0, master.node, master.target),
        (1, replica.node, replica.target),
        (2, "ghost", f"127.0.0.1:{free_port()}"),
    ):
        BrokerNode.objects.create(group=group, name=name, broker_id=broker_id, endpoint=endpoint)
    epoch = master.status().node.epoch

    # when: the operator opens the group page and its live fragment loads
    page = operator.get(f"/platform/broker-groups/{group.pk}/")
    assert page.status_code == 200 and f"/platform/broker-groups/{group.pk}/live/" in page.content.decode()
    html = operator.get(f"/platform/broker-groups/{group.pk}/live/").content.decode()

    # then: roles, the epoch, the SyncStateSet with both nodes, replication lag, health
    m, r = _row(html, "ha-state", master.node), _row(html, "ha-state", replica.node)
    assert "MASTER" in m and "writable" in m and f" {epoch} " in m
    assert re.search(rf"{master.node}, {replica.node}|{replica.node}, {master.node}", m)
    assert "REPLICA" in r and f"follows {master.node}" in r and f" {epoch} " in r
    assert re.search(r"\d+ B", r) and "healthy" in r
    # tiered storage on both: the object store URL and what is local
    t = _row(html, "tier-state", master.node)
    assert "file://" in t and "segment" in t
    assert "only the master offloads" in _row(html, "tier-state", replica.node)
    # the node that is not running is explained, not an error page
    assert _row(html, "ha-state", "ghost").strip().endswith("unreachable")
    assert re.search(
        r'id="unreachable-ghost".*did not answer.*Check that the broker process runs', html, re.S
    )

    # when the replica stops: it is reported unreachable, the master still answers
    replica.kill()
    html = operator.get(f"/platform/broker-groups/{group.pk}/live/").content.decode()
    assert f'id="unreachable-{replica.node}"' in html and "MASTER" in _row(html, "ha-state", master.node)


def test_standalone_broker_without_tiering(broker: BrokerProcess, operator: Client) -> None:
    cluster = BrokerCluster.objects.create(name="solo")
    group = BrokerGroup.objects.create(cluster=cluster, name="broker-a")
    BrokerNode.objects.create(group=group, name="broker-a-0", endpoint=broker.target)
    html = operator.get(f"/platform/broker-groups/{group.pk}/live/").content.decode()
    assert "STANDALONE" in _row(html, "ha-state", "broker-a-0")
    assert "Tiered storage is off on this node" in _row(html, "tier-state", "broker-a-0")
    # operators only
    member = Client()
    member.force_login(get_user_model().objects.create_user("dev"))
    assert member.get(f"/platform/broker-groups/{group.pk}/").status_code == 403
    assert member.get(f"/platform/broker-groups/{group.pk}/live/").status_code == 403
