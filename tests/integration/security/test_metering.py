"""Metering on a real broker: usage totals equal what was sent and received, across a restart."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.integration.broker.conftest import BrokerProcess, messages

from .conftest import client, tenant

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USAGE_FIELDS = {
    "id", "kind", "minute", "broker", "tenant", "messages_in", "bytes_in", "messages_out", "bytes_out",
    "requests_in_4k", "requests_out_4k", "api_calls", "written_at",
}  # fmt: skip
LAG_FIELDS = {
    "id", "kind", "broker", "tenant", "written_at", "ts", "group", "topic", "queue_id", "lag_messages",
    "lag_ms", "inflight", "committed_offset", "max_offset",
}  # fmt: skip


def read_records(root: Path, tree: str) -> list[dict[str, Any]]:
    """Every record under ``tree``, one per id (the latest ``written_at``), as analytics reads them."""
    latest: dict[str, dict[str, Any]] = {}
    for path in sorted((root / tree).glob("date=*/hour=*/*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            kept = latest.get(record["id"])
            if kept is None or record["written_at"] > kept["written_at"]:
                latest[record["id"]] = record
    return list(latest.values())


def _exchange(
    broker: BrokerProcess, creds: tuple[str, str], sizes: list[int], receive: int
) -> tuple[int, int]:
    """Send bodies of ``sizes``; receive + ack ``receive`` of them; returns (received, bytes)."""
    v2 = client(broker, "acme", creds)
    got: list[pb.Message] = []
    try:
        for i, size in enumerate(sizes):
            assert v2.send("orders", bytes([65 + i % 26]) * size).status.code == pb.Code.OK
        deadline = time.monotonic() + 20
        while len(got) < receive and time.monotonic() < deadline:
            batch = messages(v2.receive("billing", "orders", batch=min(16, receive - len(got)), poll_s=1))
            for m in batch:
                assert v2.ack("billing", "orders", m).status.code == pb.Code.OK
            got += batch
    finally:
        v2.close()
    assert len(got) == receive
    return len(got), sum(len(m.body) for m in got)


def test_usage_totals_equal_traffic_across_a_restart(
    secure_broker: BrokerProcess, op: BrokerAdminClient
) -> None:
    # given
    creds = tenant(op, "acme")
    root = secure_broker.data_dir.parent / "metering"
    first = [10, 4096, 4097, 9000, 1]
    second = [100] * 7 + [20_000]
    # when: traffic, a graceful restart, more traffic (the same minute, most likely)
    out1, out_bytes1 = _exchange(secure_broker, creds, first, receive=5)
    secure_broker.stop()
    secure_broker.start()
    out2, out_bytes2 = _exchange(secure_broker, creds, second, receive=6)
    time.sleep(2.5)  # a lag sample with 2 messages unconsumed, then a flush
    secure_broker.stop()
    # then: the records, one per id, add up to exactly what was sent and delivered
    usage = [r for r in read_records(root, "usage") if r["kind"] == "usage" and r["tenant"] == "acme"]
    assert usage and all(set(r) == USAGE_FIELDS for r in usage)
    sent = first + second
    total = {k: sum(r[k] for r in usage) for k in ("messages_in", "bytes_in", "messages_out", "bytes_out")}
    assert total == {
        "messages_in": len(sent),
        "bytes_in": sum(sent),
        "messages_out": out1 + out2,
        "bytes_out": out_bytes1 + out_bytes2,
    }
    assert sum(r["requests_in_4k"] for r in usage) == sum(max(1, -(-s // 4096)) for s in sent)
    assert sum(r["api_calls"].get("SendMessage", 0) for r in usage) == len(sent)
    assert sum(r["api_calls"].get("AckMessage", 0) for r in usage) == out1 + out2
    for r in usage:  # deterministic ids
        expected = hashlib.sha256(f"usage|broker-0|acme|{r['minute']}".encode()).hexdigest()
        assert r["id"] == expected and r["minute"].endswith(":00Z")
    # storage samples (start-up and hourly) and lag samples every interval, in the lag tree
    storage = [r for r in read_records(root, "usage") if r["kind"] == "storage"]
    assert {(r["tenant"], r["topic"]) for r in storage} >= {("acme", "orders")}
    assert max(r["bytes"] for r in storage) > sum(first)
    lag = read_records(root, "lag")
    assert lag and all(set(r) == LAG_FIELDS for r in lag)
    latest = max(r["ts"] for r in lag)
    now = [r for r in lag if r["ts"] == latest and (r["group"], r["topic"]) == ("billing", "orders")]
    assert sum(r["lag_messages"] for r in now) == len(sent) - out1 - out2
    assert all(r["max_offset"] - r["committed_offset"] == r["lag_messages"] for r in now)
    # files are partitioned by UTC date/hour and named {broker}-{epoch}-{seq}.jsonl
    names = [p.name for p in root.glob("usage/date=*/hour=*/*.jsonl")]
    assert names and all(n.startswith("broker-0-") for n in names)
    assert len(set(names)) == len(names)
