"""Metering files shipped to a real S3 protocol server (moto): kept locally while the store is down,
uploaded once it is back, and never duplicated by a retry after a crash."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dataplane.store.tiered.object_store import ObjectStore, ObjectStoreSettings, open_object_store
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess, messages
from tests.integration.tier.conftest import BUCKET, MotoServer

from .conftest import ADMIN_TOKEN, client, secure_broker_process, tenant

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

KEY = re.compile(r"^(usage|lag)/date=\d{4}-\d\d-\d\d/hour=\d\d/broker-0-\d+-\d+\.jsonl$")


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    server = MotoServer(free_port())
    server.start()
    yield server
    server.stop()


def s3_env(moto: MotoServer, flush_s: str) -> dict[str, str]:
    return {
        "MQ_BROKER_METERING_DIR": f"s3://{BUCKET}/metering",
        "MQ_BROKER_TIER_ENDPOINT": moto.endpoint,
        "MQ_BROKER_TIER_REGION": "us-east-1",
        "MQ_BROKER_TIER_ACCESS_KEY_ID": "test",
        "MQ_BROKER_TIER_SECRET_ACCESS_KEY": "test",
        "MQ_BROKER_TIER_REQUEST_TIMEOUT_S": "2",
        "MQ_BROKER_METERING_FLUSH_S": flush_s,
    }


def bucket(moto: MotoServer) -> ObjectStore:
    return open_object_store(
        ObjectStoreSettings(
            url=f"s3://{BUCKET}/metering",
            endpoint=moto.endpoint,
            region="us-east-1",
            access_key_id="test",
            secret_access_key="test",
        )
    )


def outbox_files(broker: BrokerProcess) -> dict[str, bytes]:
    """The outbox's files; read again when the broker ships (deletes) one or its directory while
    this walks the tree."""
    outbox = broker.data_dir / "metering-outbox"
    for _ in range(20):
        try:
            return {p.relative_to(outbox).as_posix(): p.read_bytes() for p in outbox.rglob("*.jsonl")}
        except FileNotFoundError:
            time.sleep(0.05)
    raise AssertionError("the outbox kept changing under the walk")


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def gauge(broker: BrokerProcess, name: str) -> float:
    """A gauge without labels from the broker's metrics endpoint (-1 while it cannot be read)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_listen}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return -1
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(f"{name} ")]
    return values[0] if values else -1


def exchange(broker: BrokerProcess, creds: tuple[str, str], sizes: list[int], receive: int) -> int:
    """Send bodies of ``sizes``, receive + ack ``receive`` messages; returns the bytes received."""
    v2 = client(broker, "acme", creds)
    got: list[pb.Message] = []
    try:
        for size in sizes:
            assert v2.send("orders", b"s" * size).status.code == pb.Code.OK
        deadline = time.monotonic() + 20
        while len(got) < receive and time.monotonic() < deadline:
            for m in messages(v2.receive("billing", "orders", batch=receive - len(got), poll_s=1)):
                assert v2.ack("billing", "orders", m).status.code == pb.Code.OK
                got.append(m)
    finally:
        v2.close()
    assert len(got) == receive
    return sum(len(m.body) for m in got)


def usage_in(store: ObjectStore, ns: str) -> dict[str, int]:
    latest: dict[str, dict[str, Any]] = {}
    for key in store.list("usage/"):
        for line in store.get(key).decode().splitlines():
            record = json.loads(line)
            kept = latest.get(record["id"])
            if kept is None or record["written_at"] > kept["written_at"]:
                latest[record["id"]] = record
    usage = [r for r in latest.values() if r["kind"] == "usage" and r["tenant"] == ns]
    return {k: sum(r[k] for r in usage) for k in ("messages_in", "bytes_in", "messages_out", "bytes_out")}


def test_metering_files_reach_s3_once_across_an_outage_and_a_sigkill(
    moto: MotoServer, tmp_path: Path
) -> None:
    # given: a broker shipping metering to S3, flushing every second
    broker = secure_broker_process(tmp_path / "broker", **s3_env(moto, "1"))
    broker.metrics_listen = str(free_port())
    broker.start()
    try:
        with BrokerAdminClient(broker.target, token=ADMIN_TOKEN) as op:
            creds = tenant(op, "acme")
        store = bucket(moto)
        sent = [10, 5000]
        received = exchange(broker, creds, sent, receive=1)
        # then: the files arrive under the broker's keys and leave the outbox
        wait_for(lambda: usage_in(store, "acme")["messages_in"] == 2, 30, "the first upload")
        wait_for(lambda: not outbox_files(broker), 30, "an empty outbox")
        shipped = {key: store.get(key) for key in store.list("")}
        assert shipped and all(KEY.match(key) for key in shipped), sorted(shipped)

        # when: the object store stops answering, traffic goes on
        moto.pause()
        more = [300, 300, 9000]
        received += exchange(broker, creds, more, receive=2)
        sent += more
        wait_for(lambda: any("usage/" in k for k in outbox_files(broker)), 30, "files kept in the outbox")
        # and the metrics say so
        wait_for(
            lambda: gauge(broker, "mq_metering_upload_failures") >= 1, 60, "a failed upload in the metrics"
        )
        assert gauge(broker, "mq_metering_outbox_files") >= 1
        # and the broker is killed while uploads hang
        broker.kill()
        pending = outbox_files(broker)
        assert pending
        moto.resume()
        # a crash between a PUT and the local delete leaves an uploaded file in the outbox as well
        again = sorted(k for k in shipped if k.startswith("usage/"))[0]
        target = broker.data_dir / "metering-outbox" / again
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(shipped[again])
        pending[again] = shipped[again]

        # then: the restarted broker (no timed flush now) uploads what waited, each to its own key once
        broker.env.update(s3_env(moto, "3600"))
        broker.start()
        wait_for(lambda: not outbox_files(broker), 60, "the outbox shipped after the restart")
        keys = set(store.list(""))
        assert keys == set(shipped) | set(pending)
        assert all(store.get(key) == data for key, data in pending.items())
        # and after a graceful stop the totals in S3 are exactly the traffic (nothing lost or doubled)
        broker.stop()
        assert usage_in(store, "acme") == {
            "messages_in": len(sent),
            "bytes_in": sum(sent),
            "messages_out": 3,
            "bytes_out": received,
        }
        assert all(KEY.match(key) for key in store.list(""))
        assert not outbox_files(broker)
    finally:
        moto.resume()
        broker.kill()
