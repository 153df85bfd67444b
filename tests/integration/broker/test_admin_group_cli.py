"""``mqctl admin group ...`` against a real broker: create, update, list, stats (lag in messages and
in time, in flight), delete, and the one-line errors for what does not exist."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = pytest.mark.integration


def _run(broker: BrokerProcess, *args: str, fmt: str = "json") -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["admin", "--broker", broker.target, "-o", fmt, *args])
    return result.exit_code, result.stdout, result.stderr


def _json(broker: BrokerProcess, *args: str) -> Any:
    code, out, err = _run(broker, *args)
    assert code == 0, out + err
    return json.loads(out)


def _stats(broker: BrokerProcess) -> dict[str, int]:
    """The one queue's row of ``group stats``."""
    (row,) = _json(broker, "group", "stats", "acme%readers", "--topic", "acme%orders")
    assert (row["topic"], row["queue_id"]) == ("acme%orders", 0)
    numbers = {k: row[k] for k in ("committed_offset", "max_offset", "lag_messages", "lag_ms", "in_flight")}
    # JSON numbers, not proto3 JSON's strings for int64: jq's `.lag_ms > 1000` must compare numbers
    assert all(type(v) is int for v in numbers.values()), row
    return numbers


def test_group_lifecycle_and_policy(broker: BrokerProcess, admin: BrokerAdminClient) -> None:
    # given / when: created through the CLI
    (created,) = _json(
        broker, "group", "create", "readers", "--namespace", "acme", "--fifo",
        "--max-delivery-attempts", "3", "--retry-delays-ms", "1000,2000",
    )  # fmt: skip
    # then: the CLI echoes it and the broker holds it, retry policy included
    assert (created["name"], created["fifo"], created["max_delivery_attempts"]) == ("acme%readers", True, 3)
    assert created["retry_policy"]["customized"]["delays_ms"] == [1000, 2000]
    group = admin.get_group("acme%readers")
    assert (group.fifo, group.max_delivery_attempts) == (True, 3)
    assert list(group.retry_policy.customized.delays_ms) == [1000, 2000]

    _json(broker, "group", "create", "audit", "--namespace", "acme", "--broadcast")
    _json(broker, "group", "create", "other", "--namespace", "globex")
    listed = _json(broker, "group", "list", "--namespace", "acme")
    assert [(g["name"], g["broadcast"]) for g in listed] == [("acme%audit", True), ("acme%readers", False)]
    assert {g["name"] for g in _json(broker, "group", "list")} == {
        "acme%audit",
        "acme%readers",
        "globex%other",
    }

    # update changes only the options given
    (updated,) = _json(broker, "group", "update", "acme%readers", "--no-fifo", "--max-delivery-attempts", "5")
    assert (updated["fifo"], updated["max_delivery_attempts"]) == (False, 5)
    group = admin.get_group("acme%readers")
    assert (group.fifo, group.max_delivery_attempts, group.broadcast) == (False, 5, False)
    assert list(group.retry_policy.customized.delays_ms) == [1000, 2000]

    # the table form names the columns an operator reads
    code, out, _ = _run(broker, "group", "list", "--namespace", "acme", fmt="table")
    assert code == 0 and "max_delivery_attempts" in out and "acme%readers" in out

    code, _, err = _run(broker, "group", "delete", "acme%audit", fmt="table")
    assert code == 0 and "deleted" in err
    assert [g.name for g in admin.list_groups("acme")] == ["acme%readers"]

    # what does not exist: a non-zero exit and one line, no traceback
    for args in (
        ("group", "delete", "acme%audit"),
        ("group", "update", "acme%ghost", "--fifo"),
        ("group", "stats", "acme%ghost"),
    ):
        code, out, err = _run(broker, *args)
        assert code != 0, args
        assert "Traceback" not in out + err and len((out + err).strip().splitlines()) == 1, out + err
    code, out, err = _run(broker, "group", "create", "readers", "--namespace", "acme")
    assert code != 0 and "ALREADY_EXISTS" in out + err


def test_group_stats_lag_in_messages_and_time(broker: BrokerProcess, admin: BrokerAdminClient) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=1)
    _json(broker, "group", "create", "readers", "--namespace", "acme")
    v2 = V2(broker.target, namespace="acme")
    try:
        # nothing stored yet: no lag of either kind
        assert _stats(broker) == {
            "committed_offset": 0, "max_offset": 0, "lag_messages": 0, "lag_ms": 0, "in_flight": 0,
        }  # fmt: skip

        # given: m0, then 1.2 s later m1, then 0.5 s of waiting
        t0 = time.time()
        assert v2.send("orders", b"m0").status.code == pb.Code.OK
        stored0 = time.time()  # m0's store time is in [t0, stored0]
        time.sleep(1.2)
        assert v2.send("orders", b"m1").status.code == pb.Code.OK
        time.sleep(0.5)

        # then: the lag in time is the age of the oldest unconsumed message, m0
        before = time.time()
        stats = _stats(broker)
        after = time.time()
        assert (stats["lag_messages"], stats["max_offset"], stats["committed_offset"]) == (2, 2, 0)
        assert int((before - stored0) * 1000) - 20 <= stats["lag_ms"] <= int((after - t0) * 1000) + 20

        # the group totals from the admin API agree with the CLI's per-queue row
        totals = admin.group_stats("acme%readers", "acme%orders")
        assert (totals.lag_messages, totals.in_flight) == (2, 0) and totals.lag_ms >= stats["lag_ms"]

        # when: m0 is received, it is in flight and still the oldest unconsumed message
        [m0, m1] = messages(v2.receive("readers", "orders", invisible_s=30))
        assert (m0.body, m1.body) == (b"m0", b"m1")
        assert v2.ack("readers", "orders", m1).status.code == pb.Code.OK
        stats = _stats(broker)
        assert (stats["in_flight"], stats["lag_messages"], stats["committed_offset"]) == (1, 2, 0)
        assert stats["lag_ms"] >= 1700

        # when: m0 is acknowledged, nothing is left: lag falls to zero in both units
        assert v2.ack("readers", "orders", m0).status.code == pb.Code.OK
        assert _stats(broker) == {
            "committed_offset": 2, "max_offset": 2, "lag_messages": 0, "lag_ms": 0, "in_flight": 0,
        }  # fmt: skip

        # when: a third message waits, the lag in time is its own age, not the group's history
        t2 = time.time()
        assert v2.send("orders", b"m2").status.code == pb.Code.OK
        time.sleep(0.3)
        stats = _stats(broker)
        assert stats["lag_messages"] == 1
        assert 280 <= stats["lag_ms"] <= int((time.time() - t2) * 1000) + 20
        assert stats["lag_ms"] < int((t2 - stored0) * 1000)  # less than m0 would show: over 1.7 s

        # the table shows the time column to an operator
        code, out, _ = _run(broker, "group", "stats", "acme%readers", "--topic", "acme%orders", fmt="table")
        assert code == 0 and "lag_ms" in out and "lag_messages" in out
    finally:
        v2.close()
