"""What a group leaves behind: deleting a group or a topic drops its POP positions and committed
offsets, and broadcast members that stopped receiving are dropped after a while (a real broker)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqcloud.admin_client import BrokerAdminClient
from tests.conftest import free_port
from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _pop_groups(data_dir: Path) -> set[tuple[str, str]]:
    """(group, topic) of every POP position in a stopped broker's snapshot (written at the stop)."""
    items = json.loads((data_dir / "pop" / "snapshot.json").read_text())
    return {(i["g"], i["t"]) for i in items if "g" in i}


def _offsets(data_dir: Path) -> set[tuple[str, str]]:
    """(group, topic) of every committed offset in a stopped broker's table ("topic@group" keys)."""
    table = json.loads((data_dir / "store" / "config" / "consumerOffset.json").read_text())
    return {(key.partition("@")[2], key.partition("@")[0]) for key in table["offsetTable"]}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[BrokerProcess]:
    env = {
        # a member idle for 1.5 s is dropped, looked at every 0.3 s
        "MQ_BROKER_BROADCAST_MEMBER_IDLE_HOURS": str(1.5 / 3600),
        "MQ_BROKER_BROADCAST_EXPIRE_CHECK_S": "0.3",
    }
    process = BrokerProcess(tmp_path / "broker", free_port(), env=env)
    process.start()
    yield process
    process.kill()


def test_deleting_a_group_or_topic_drops_its_positions_and_offsets(node: BrokerProcess) -> None:
    admin = BrokerAdminClient(node.target)
    v2 = V2(node.target)
    for topic in ("orders", "audit"):
        admin.create_topic(topic, queue_count=1)
    for group in ("billing", "reports"):
        admin.create_group(group)
    for i in range(5):
        v2.send("orders", f"o{i}".encode())
        v2.send("audit", f"a{i}".encode())
    held = messages(v2.receive("billing", "orders", batch=5))  # in flight, never acked
    assert len(held) == 5
    for topic, count in (("orders", 2), ("audit", 3)):  # acked: committed offsets on both
        got = messages(v2.receive("reports", topic, batch=count))
        assert len(got) == count
        for m in got:
            assert v2.ack("reports", topic, m).status.code == 20000
    for m in held[:2]:  # billing commits too, then holds the rest
        assert v2.ack("billing", "orders", m).status.code == 20000
    assert admin.group_stats("billing", "orders").in_flight == 3

    admin.delete_group("billing")
    admin.create_group("billing")  # the same name again: a new group, from the oldest message
    stats = admin.group_stats("billing", "orders")
    assert (stats.in_flight, stats.lag_messages) == (0, 5)
    assert v2.ack("billing", "orders", held[4]).status.code != 20000  # the old handles are gone
    admin.delete_topic("audit")
    v2.close()
    node.stop()
    assert _pop_groups(node.data_dir) == {("reports", "orders")}
    offsets = _offsets(node.data_dir)
    assert ("reports", "orders") in offsets
    assert not {g for g, t in offsets if g == "billing" or t == "audit"}


def test_broadcast_members_that_stop_receiving_are_dropped(node: BrokerProcess) -> None:
    admin = BrokerAdminClient(node.target)
    admin.create_topic("news", queue_count=1)
    admin.create_group("readers", broadcast=True)
    gone, staying = V2(node.target), V2(node.target)
    v2 = V2(node.target)
    for member in (gone, staying):  # a member gets what is stored after it first came
        assert messages(member.receive("readers", "news", poll_s=0.2)) == []
    v2.send("news", b"n0")
    for member in (gone, staying):
        assert len(messages(member.receive("readers", "news"))) == 1
    deadline = time.monotonic() + 3.0  # past the idle bound for the first member only
    while time.monotonic() < deadline:
        staying.receive("readers", "news", poll_s=0.2)
    for client in (gone, staying, v2):
        client.close()
    node.stop()
    groups = {g for g, _ in _pop_groups(node.data_dir)}
    assert groups == {f"readers@{staying.client_id}"}
    assert f"readers@{gone.client_id}" not in {g for g, _ in _offsets(node.data_dir)}
