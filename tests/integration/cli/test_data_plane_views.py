"""mqctl's look-ups through the control plane's data-plane views: get, query, trace, stats, lag,
offset reset and the DLQ, over a real broker (messages produced and consumed with the SDK)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.integration.cli.conftest import Mqctl, Stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def consume(mqctl: Mqctl, *args: str) -> list[dict[str, Any]]:
    result = mqctl.ok(
        "message", "consume", "orders", "-g", "billing", "--idle-timeout", "3", "-o", "json", *args
    )
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_lookups_dlq_and_offsets(stack: Stack, operator: Mqctl, tenant: str) -> None:
    # given: one queue (offsets are predictable) and a group that dead-letters after one delivery
    operator.ok("key", "create", "--save")
    operator.ok("topic", "create", "orders", "--queues", "1")
    operator.ok("group", "create", "billing", "--max-delivery-attempts", "1")
    first = operator.json("message", "send", "orders", "one", "-k", "k-1", "-p", "a=1")
    second = operator.json("message", "send", "orders", "two", "--via-api")  # the API's test send
    assert (first["queue_id"], first["offset"]) == (0, 0)
    assert second["queue_offset"] == 1 and second["broker"]

    # stats, get, query
    stats = operator.json("topic", "stats", "orders")
    assert stats["messages_total"] == 2 and [q["queue_id"] for q in stats["queues"]] == [0]
    assert "2 messages" in operator.ok("topic", "stats", "orders").stdout
    got = operator.json("message", "get", "orders", first["message_id"])
    assert got["message_id"] == first["message_id"] and got["properties"] == {"a": "1"}
    raw = operator.ok("message", "get", "orders", first["message_id"], "--body-only")
    assert raw.stdout_bytes == b"one"
    by_key = operator.json("message", "query", "orders", "--key", "k-1")
    assert [m["message_id"] for m in by_key] == [first["message_id"]]
    by_queue = operator.json("message", "query", "orders", "--queue-id", "0")
    assert [m["message_id"] for m in by_queue] == [first["message_id"], second["message_id"]]
    by_time = operator.json("message", "query", "orders", "--begin", stats["queues"][0]["last_store_time"])
    assert by_time[-1]["message_id"] == second["message_id"]
    assert "one" in operator.ok("message", "query", "orders", "--queue-id", "0").stdout  # body preview

    # the first is consumed; the second is received, not acked, and runs out of its one attempt
    assert [m["body"] for m in consume(operator, "--max", "1")] == ["one"]
    assert [m["body"] for m in consume(operator, "--max", "1", "--no-ack", "--invisible-seconds", "1")] == [
        "two"
    ]
    time.sleep(1.5)
    assert consume(operator, "--idle-timeout", "1") == []
    dead = operator.json("dlq", "list", "-g", "billing")
    assert [(d["message_id"], d["topic"]) for d in dead] == [(second["message_id"], "orders")]
    lag = operator.json("group", "lag", "billing")
    assert {"group", "total_lag", "queues"} <= lag.keys()
    assert isinstance(operator.json("group", "clients", "billing"), list)
    assert isinstance(operator.json("topic", "producers", "orders"), list)

    # redrive brings it back to this group
    assert operator.json("dlq", "redrive", "-g", "billing", second["message_id"]) == {
        "group": "billing",
        "redriven": 1,
    }
    assert [m["message_id"] for m in consume(operator, "--max", "1")] == [second["message_id"]]
    deadline = time.monotonic() + 15
    while True:
        events = [
            e["event"] for e in operator.json("message", "trace", "orders", second["message_id"])["events"]
        ]
        if events[-1:] == ["acked"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert events == ["stored", "delivered", "dead_lettered", "redriven", "delivered", "acked"]
    assert "dead_lettered" in operator.ok("message", "trace", "orders", second["message_id"]).stdout

    # back to the beginning: both are delivered again
    reset = operator.json("offset", "reset", "-g", "billing", "--topic", "orders", "--to", "beginning")
    assert [(q["queue_id"], q["offset"]) for q in reset["queues"]] == [(0, 0)]
    assert {m["message_id"] for m in consume(operator, "--max", "2")} == {
        first["message_id"],
        second["message_id"],
    }

    # errors
    assert operator("message", "get", "orders", "NOPE").exit_code == 3
    assert operator("message", "trace", "orders", "NOPE").exit_code == 3
    assert operator("message", "query", "orders").exit_code == 2
    assert operator("message", "query", "orders", "--key", "has space").exit_code == 2  # the API's 400
    assert operator("offset", "reset", "-g", "billing", "--topic", "orders", "--to", "time").exit_code == 2
    assert operator("dlq", "redrive", "-g", "billing").exit_code == 2
    assert operator("dlq", "list", "-g", "nobody").exit_code == 3


def test_a_broker_that_is_away_is_exit_7(stack: Stack, operator: Mqctl) -> None:
    # a tenant on a cluster whose only broker does not run: the views answer 503 broker_unavailable
    import uuid

    from tests.conftest import free_port

    cluster = f"c{uuid.uuid4().hex[:8]}"
    operator.ok("cluster", "create", cluster)
    operator.ok("cluster", "group", "create", f"{cluster}-a", "--cluster", cluster)
    operator.ok(
        "cluster",
        "node",
        "add",
        f"{cluster}-a-0",
        "--group",
        f"{cluster}-a",
        "--endpoint",
        f"127.0.0.1:{free_port()}",
    )
    ns = f"t{uuid.uuid4().hex[:10]}"
    operator.ok("tenant", "create", ns, "--cluster", cluster)
    operator.ok("topic", "create", "orders", "--tenant", ns, "--no-wait")
    result = operator("topic", "stats", "orders", "--tenant", ns)
    assert result.exit_code == 7, result.output
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
