"""Tiered storage through a real broker process, the SDK and a real S3 protocol server (moto)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from dataplane.store.tiered.manifest import MANIFEST_KEY, commitlog_key
from dataplane.store.tiered.object_store import ObjectStore, ObjectStoreSettings, open_object_store
from mqcloud import Message, Producer, SimpleConsumer
from mqcloud.admin.v1 import tier_pb2
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.admin_tier import TierAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.integration.broker.conftest import TEST_SEGMENT_BYTES, V2, BrokerProcess
from tests.integration.tier.conftest import BUCKET, MotoServer, ThrottleProxy, tier_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

NS = "cold"
BODY = 64 << 10
# a little over two segments: two sealed ones to offload, the active one stays local
COUNT = (2 * TEST_SEGMENT_BYTES) // BODY + 20


def s3_objects(moto: MotoServer) -> ObjectStore:
    return open_object_store(
        ObjectStoreSettings(
            url=f"s3://{BUCKET}/tier/broker-0",
            endpoint=moto.endpoint,
            region="us-east-1",
            access_key_id="test",
            secret_access_key="test",
        )
    )


def setup_topic(broker: BrokerProcess) -> tuple[str, str]:
    with BrokerAdminClient(broker.target) as admin:
        admin.create_topic(f"{NS}%orders", queue_count=2, namespace=NS, tiered_retention_hours=24)
        admin.create_group(f"{NS}%g1", namespace=NS)
        admin.create_group(f"{NS}%g2", namespace=NS)
    return "orders", "g1"


def produce(broker: BrokerProcess, count: int, start: int = 0) -> dict[str, bytes]:
    sent: dict[str, bytes] = {}
    config_target = broker.target
    from mqcloud import ClientConfig

    with Producer(ClientConfig(config_target, namespace=NS), ["orders"]) as producer:
        for i in range(start, start + count):
            body = os.urandom(BODY)
            receipt = producer.send(Message("orders", body, keys=[f"k{i}"]))
            sent[receipt.message_id] = body
    return sent


def consume_all(broker: BrokerProcess, group: str, want: dict[str, bytes], deadline_s: float = 90) -> None:
    """Receive until every message of ``want`` arrived; every body must match byte for byte."""
    from mqcloud import ClientConfig

    got: dict[str, bytes] = {}
    deadline = time.monotonic() + deadline_s
    with SimpleConsumer(
        ClientConfig(broker.target, namespace=NS), group, {"orders": "*"}, await_duration=2
    ) as consumer:
        while not set(want) <= set(got) and time.monotonic() < deadline:
            for m in consumer.receive(32, 30):
                consumer.ack(m)
                got[m.message_id] = m.body
    missing = set(want) - set(got)
    assert not missing, f"{len(missing)} of {len(want)} messages never arrived"
    assert all(got[mid] == body for mid, body in want.items())


def status(broker: BrokerProcess) -> tier_pb2.GetTierStatusResponse:
    with TierAdminClient(broker.target) as client:
        return client.status()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def offloaded_and_deleted(broker: BrokerProcess, segments: int) -> bool:
    st = status(broker)
    return st.tiered_segments >= segments and st.local_min_offset >= segments * TEST_SEGMENT_BYTES


def pull_all(broker: BrokerProcess, queue_id: int) -> list[bytes]:
    v2 = V2(broker.target, namespace=NS)
    try:
        bodies: list[bytes] = []
        offset = 0
        while True:
            request = svc.PullMessageRequest(
                group=v2.res("g2"),
                message_queue=pb.MessageQueue(topic=v2.res("orders"), id=queue_id),
                offset=offset,
                batch_size=32,
                filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
            )
            request.long_polling_timeout.FromMilliseconds(100)
            responses = list(v2.stub.PullMessage(request, metadata=v2.md, timeout=30))
            batch = [r.message.body for r in responses if r.WhichOneof("content") == "message"]
            nxt = [r.next_offset for r in responses if r.WhichOneof("content") == "next_offset"]
            if not batch:
                return bodies
            bodies.extend(batch)
            offset = nxt[0]
    finally:
        v2.close()


@pytest.mark.parametrize("backend", [pytest.param("s3", id="s3-moto"), pytest.param("file", id="local-dir")])
def test_offload_delete_local_and_read_back_through_the_broker(
    backend: str, monkeypatch: pytest.MonkeyPatch, tier_broker: BrokerProcess, request: pytest.FixtureRequest
) -> None:
    # given: a broker that tiers to moto (or a local directory), hot retention 0
    moto: MotoServer | None = request.getfixturevalue("moto") if backend == "s3" else None
    tier_env(monkeypatch, moto.endpoint if moto else None)
    tier_broker.start()
    setup_topic(tier_broker)
    # when: a little more than two segments are produced
    sent = produce(tier_broker, COUNT)
    # then: both sealed segments are offloaded, verified and gone from the disk
    wait_for("offload + local deletion", lambda: offloaded_and_deleted(tier_broker, 2))
    commitlog = tier_broker.data_dir / "store" / "commitlog"
    assert len(list(commitlog.iterdir())) == 1
    if moto is not None:
        objects = s3_objects(moto)
        assert objects.head(commitlog_key(0)).size == TEST_SEGMENT_BYTES
        manifest = json.loads(objects.get(MANIFEST_KEY))
        assert [s["start"] for s in manifest["segments"]][:2] == [0, TEST_SEGMENT_BYTES]
    # and a new group reads everything, cold then hot, byte for byte (ReceiveMessage via the SDK)
    consume_all(tier_broker, "g1", sent)
    # PullMessage from offset 0 of each queue sees every message too
    pulled = pull_all(tier_broker, 0) + pull_all(tier_broker, 1)
    assert sorted(pulled) == sorted(sent.values())
    # QueryOffset by time over the cold range answers the first offset
    v2 = V2(tier_broker.target, namespace=NS)
    try:
        query = svc.QueryOffsetRequest(
            message_queue=pb.MessageQueue(topic=v2.res("orders"), id=0),
            query_offset_policy=pb.QueryOffsetPolicy.TIMESTAMP,
        )
        query.timestamp.FromMilliseconds(0)
        assert v2.stub.QueryOffset(query, metadata=v2.md, timeout=10).offset == 0
    finally:
        v2.close()
    # the admin CLI shows the tier, with per-topic bytes and a cold-read hit rate
    result = CliRunner().invoke(app, ["admin", "--broker", tier_broker.target, "--json", "tier", "status"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert int(shown["tiered_segments"]) >= 2 and shown["manifest_loaded"] is True
    (topic,) = [t for t in shown["topics"] if t["topic"] == f"{NS}%orders"]
    assert int(topic["tiered_bytes"]) > TEST_SEGMENT_BYTES and int(topic["local_bytes"]) > 0
    assert float(shown["cache_hit_rate"]) > 0.5


def test_broker_killed_mid_upload_recovers_without_a_hole(
    monkeypatch: pytest.MonkeyPatch, tier_broker: BrokerProcess, moto: MotoServer
) -> None:
    # given: uploads crawl through a 4 MB/s proxy, so a 16 MiB segment takes seconds
    proxy = ThrottleProxy(moto.port, rate=4 << 20)
    try:
        tier_env(monkeypatch, proxy.endpoint)
        tier_broker.start()
        setup_topic(tier_broker)
        sent = produce(tier_broker, COUNT)
        baseline = proxy.upstream_bytes
        # when: the broker is killed while the first segment is on the wire
        wait_for("an upload in flight", lambda: proxy.upstream_bytes > baseline + (3 << 20), timeout=60)
        tier_broker.kill()
        # then: the manifest lists no segment whose bytes are not all there
        objects = s3_objects(moto)
        try:
            listed = json.loads(objects.get(MANIFEST_KEY))["segments"]
        except Exception:
            listed = []
        for seg in listed:
            assert objects.head(commitlog_key(seg["start"])).size == seg["size"]
        assert len(listed) < 2
        # and after a restart (full speed) everything is offloaded and reads back byte for byte
        proxy.rate = None
        tier_broker.start()
        wait_for("offload after restart", lambda: offloaded_and_deleted(tier_broker, 2))
        consume_all(tier_broker, "g1", sent)
    finally:
        proxy.close()


def test_object_store_outage_offload_waits_while_produce_and_consume_work(
    monkeypatch: pytest.MonkeyPatch, tier_broker: BrokerProcess, moto: MotoServer
) -> None:
    tier_env(monkeypatch, moto.endpoint, MQ_BROKER_TIER_REQUEST_TIMEOUT_S="1")
    tier_broker.start()
    setup_topic(tier_broker)
    half = COUNT // 2 + 10  # a little over one segment
    first = produce(tier_broker, half)
    wait_for("first offload", lambda: offloaded_and_deleted(tier_broker, 1))
    consume_all(tier_broker, "g1", first)
    # when: the S3 server stops (SIGSTOP: connections hang, requests time out)
    moto.pause()
    try:
        began = time.monotonic()
        second = produce(tier_broker, half, start=half)
        produce_s = time.monotonic() - began
        # then: the hot path keeps serving
        consume_all(tier_broker, "g1", second)
        wait_for("failed offload passes", lambda: status(tier_broker).offload_failures > 0, timeout=60)
        st = status(tier_broker)
        assert st.tiered_segments == 1 and st.offload_lag_bytes >= TEST_SEGMENT_BYTES
        assert st.local_min_offset == TEST_SEGMENT_BYTES  # waiting segments stay on disk
        assert produce_s < 60
    finally:
        moto.resume()
    # and once it is back, offload catches up and a new group reads all of it byte for byte
    wait_for("offload after the outage", lambda: offloaded_and_deleted(tier_broker, 2))
    consume_all(tier_broker, "g2", first | second)
    assert Path(tier_broker.data_dir).exists()
