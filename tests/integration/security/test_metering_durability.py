"""Metering survives SIGKILL: what a client saw acknowledged is in the usage records afterwards.

The brokers here flush metering files once an hour, so everything counted before the kill exists
only in the journal (``{data_dir}/metering-journal``); the totals after a restart prove the replay.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess, messages

from .conftest import ADMIN_TOKEN, client, secure_broker_process, tenant
from .test_metering import read_records
from .test_metering_s3 import gauge

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]

NO_TIMED_FLUSH = {"MQ_BROKER_METERING_FLUSH_S": "3600", "MQ_BROKER_LAG_SAMPLE_S": "3600"}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = secure_broker_process(tmp_path / "broker", **NO_TIMED_FLUSH)
    process.start()
    yield process
    process.kill()


def usage_totals(root: Path, ns: str) -> dict[str, Any]:
    usage = [r for r in read_records(root, "usage") if r["kind"] == "usage" and r["tenant"] == ns]
    totals: dict[str, Any] = {
        k: sum(r[k] for r in usage)
        for k in ("messages_in", "bytes_in", "messages_out", "bytes_out", "requests_in_4k")
    }
    calls: dict[str, int] = {}
    for r in usage:
        for rpc, n in r["api_calls"].items():
            calls[rpc] = calls.get(rpc, 0) + n
    totals["api_calls"] = calls
    return totals


def test_counts_acknowledged_before_a_sigkill_are_recovered_exactly(broker: BrokerProcess) -> None:
    # given
    with BrokerAdminClient(broker.target, token=ADMIN_TOKEN) as op:
        creds = tenant(op, "acme")
    root = broker.data_dir.parent / "metering"
    sizes = [1, 4096, 4097, 10_000, 300]
    v2 = client(broker, "acme", creds)
    got: list[pb.Message] = []
    try:
        for size in sizes:
            assert v2.send("orders", b"x" * size).status.code == pb.Code.OK
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            for m in messages(v2.receive("billing", "orders", batch=3 - len(got), poll_s=1)):
                assert v2.ack("billing", "orders", m).status.code == pb.Code.OK
                got.append(m)
    finally:
        v2.close()
    assert len(got) == 3
    assert not list(root.glob("usage/**/*.jsonl"))  # nothing was flushed: the counts are only journaled
    # when: SIGKILL, then a restart and a graceful stop (which flushes and ships)
    broker.kill()
    broker.start()
    broker.stop()
    # then: every acknowledged send, delivery and ack is in the records, exactly once
    totals = usage_totals(root, "acme")
    assert totals["messages_in"] == len(sizes) and totals["bytes_in"] == sum(sizes)
    assert totals["requests_in_4k"] == 1 + 1 + 2 + 3 + 1
    assert totals["messages_out"] == 3 and totals["bytes_out"] == sum(len(m.body) for m in got)
    assert totals["api_calls"]["SendMessage"] == len(sizes)
    assert totals["api_calls"]["AckMessage"] == 3
    # and the journal covered by the checkpoint is gone, the outbox empty
    assert not list((broker.data_dir / "metering-outbox").glob("**/*.jsonl"))
    assert [p.stat().st_size for p in (broker.data_dir / "metering-journal").glob("*.log")] in ([], [0])


def test_sigkill_under_load_loses_no_acknowledged_count(broker: BrokerProcess) -> None:
    # given: a producer and a consumer running flat out
    with BrokerAdminClient(broker.target, token=ADMIN_TOKEN) as op:
        creds = tenant(op, "acme")
    root = broker.data_dir.parent / "metering"
    body = b"m" * 700
    stats = {"attempted": 0, "acked": 0, "received": 0, "received_bytes": 0, "ack_ok": 0}
    stop = threading.Event()

    def produce() -> None:
        v2 = client(broker, "acme", creds)
        try:
            while not stop.is_set():
                stats["attempted"] += 1
                if v2.send("orders", body).status.code == pb.Code.OK:
                    stats["acked"] += 1
        except Exception:  # the broker died under the call
            return
        finally:
            v2.close()

    def consume() -> None:
        v2 = client(broker, "acme", creds)
        try:
            while not stop.is_set():
                for m in messages(v2.receive("billing", "orders", batch=8, poll_s=1)):
                    stats["received"] += 1
                    stats["received_bytes"] += len(m.body)
                    if v2.ack("billing", "orders", m).status.code == pb.Code.OK:
                        stats["ack_ok"] += 1
        except Exception:
            return
        finally:
            v2.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while (stats["acked"] < 200 or stats["ack_ok"] < 50) and time.monotonic() < deadline:
        time.sleep(0.1)
    # when: SIGKILL in the middle of it
    broker.kill()
    stop.set()
    for t in threads:
        t.join(30)
    assert stats["acked"] >= 200 and stats["ack_ok"] >= 50, stats
    broker.start()
    broker.stop()
    # then: every acknowledged call is metered; at most the calls cut off by the kill are extra
    totals = usage_totals(root, "acme")
    assert stats["acked"] <= totals["messages_in"] <= stats["attempted"], (totals, stats)
    assert totals["bytes_in"] == totals["messages_in"] * len(body)
    assert stats["acked"] <= totals["api_calls"]["SendMessage"] <= stats["attempted"]
    assert totals["messages_out"] >= stats["received"], (totals, stats)
    assert totals["bytes_out"] == totals["messages_out"] * len(body)
    assert totals["api_calls"]["AckMessage"] >= stats["ack_ok"]


def test_a_sync_flush_broker_fsyncs_the_metering_journal_before_the_ack(tmp_path: Path) -> None:
    # given: a SYNC_FLUSH broker (no timed flush) with its metrics endpoint
    broker = secure_broker_process(tmp_path / "broker", MQ_BROKER_FLUSH="sync", **NO_TIMED_FLUSH)
    broker.metrics_listen = str(free_port())
    broker.start()
    try:
        with BrokerAdminClient(broker.target, token=ADMIN_TOKEN) as op:
            creds = tenant(op, "acme")
        v2 = client(broker, "acme", creds)
        try:
            for size in (10, 5000, 70_000):
                # when: a send is acknowledged
                assert v2.send("orders", b"f" * size).status.code == pb.Code.OK
                # then: every journal entry so far, its counts included, was covered by an fsync
                appended, synced = (
                    gauge(broker, "mq_metering_journal_entries"),
                    gauge(broker, "mq_metering_journal_synced_entries"),
                )
                assert appended >= 2 and synced == appended, (appended, synced)
        finally:
            v2.close()
    finally:
        broker.kill()
    # and the counts are there after the SIGKILL
    broker.start()
    broker.stop()
    totals = usage_totals(broker.data_dir.parent / "metering", "acme")
    assert (totals["messages_in"], totals["bytes_in"]) == (3, 75_010)


def test_repeated_sigkills_during_frequent_flushes_count_each_send_once(tmp_path: Path) -> None:
    # given: a broker that flushes metering five times a second, so kills land in every phase of a
    # flush (journal rotation, checkpoint, files, journal cleanup, upload)
    broker = secure_broker_process(tmp_path / "broker", MQ_BROKER_METERING_FLUSH_S="0.2")
    acked = attempted = 0
    try:
        for round_ in range(5):
            broker.start()
            if round_ == 0:
                with BrokerAdminClient(broker.target, token=ADMIN_TOKEN) as op:
                    creds = tenant(op, "acme")
            v2 = client(broker, "acme", creds)
            stop_at = time.monotonic() + 0.7 + 0.13 * round_
            try:
                while time.monotonic() < stop_at:
                    attempted += 1
                    if v2.send("orders", b"r" * 321).status.code == pb.Code.OK:
                        acked += 1
            finally:
                v2.close()
            # when: SIGKILL (the last send was answered; a flush may be running)
            broker.kill()
        broker.start()
        broker.stop()
    finally:
        broker.kill()
    # then: every acknowledged send counted, and none twice
    totals = usage_totals(broker.data_dir.parent / "metering", "acme")
    assert acked > 100 and acked == attempted  # every send was answered before its round's kill
    assert totals["messages_in"] == acked, (acked, totals["messages_in"])
    assert totals["bytes_in"] == totals["messages_in"] * 321
