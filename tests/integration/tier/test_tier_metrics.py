"""The ``mq_tier_*`` Prometheus metrics of a broker that offloads to a real S3 server (moto), scraped
over HTTP from its metrics endpoint: bytes local vs tiered (per topic too), offload lag, offloaded
segments, failed passes during an outage, and the cold-read cache hit rate."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dataplane.store.tiered.manifest import MANIFEST_KEY, commitlog_key, cq_key, index_key
from dataplane.store.tiered.object_store import ObjectStoreSettings, open_object_store
from mqcloud import ClientConfig, Message, Producer, SimpleConsumer
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.admin_tier import TierAdminClient
from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess
from tests.integration.tier.conftest import BUCKET, MotoServer, tier_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

NS = "cold"
TOPIC = f"{NS}%orders"
SEGMENT = 1 << 20  # small segments: a few dozen 64 KiB messages fill two
BODY = 64 << 10
COUNT = (2 * SEGMENT) // BODY + 6  # two sealed segments to offload, the active one stays local

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    response.raise_for_status()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
        if s.name.startswith("mq_tier_")
    }


def one(m: Samples, name: str, **labels: str) -> float:
    return m[(name, frozenset(labels.items()))]


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def produce(broker: BrokerProcess, count: int, start: int = 0) -> dict[str, bytes]:
    sent: dict[str, bytes] = {}
    with Producer(ClientConfig(broker.target, namespace=NS), ["orders"]) as producer:
        for i in range(start, start + count):
            body = os.urandom(BODY)
            sent[producer.send(Message("orders", body, keys=[f"k{i}"])).message_id] = body
    return sent


def consume_all(broker: BrokerProcess, group: str, want: dict[str, bytes]) -> None:
    got: dict[str, bytes] = {}
    deadline = time.monotonic() + 90
    with SimpleConsumer(
        ClientConfig(broker.target, namespace=NS), group, {"orders": "*"}, await_duration=2
    ) as consumer:
        while not set(want) <= set(got) and time.monotonic() < deadline:
            for m in consumer.receive(32, 30):
                consumer.ack(m)
                got[m.message_id] = m.body
    assert got == want


@pytest.fixture
def metered_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, int]]:
    port = free_port()
    broker = BrokerProcess(
        tmp_path / "broker",
        free_port(),
        metrics_listen=f"127.0.0.1:{port}",
        env={"MQ_BROKER_COMMIT_LOG_SEGMENT_BYTES": str(SEGMENT)},
    )
    yield broker, port
    broker.kill()


def test_tier_metrics_follow_offload_outage_and_cold_reads(
    monkeypatch: pytest.MonkeyPatch, metered_broker: tuple[BrokerProcess, int], moto: MotoServer
) -> None:
    broker, port = metered_broker
    tier_env(
        monkeypatch,
        moto.endpoint,
        MQ_BROKER_TIER_REQUEST_TIMEOUT_S="1",
        MQ_BROKER_TIER_BLOCK_BYTES=str(256 << 10),
        MQ_BROKER_TIER_PREFETCH_BLOCKS="2",
    )
    broker.start()
    with BrokerAdminClient(broker.target) as admin:
        admin.create_topic(TOPIC, queue_count=2, namespace=NS, tiered_retention_hours=24)
        admin.create_group(f"{NS}%g1", namespace=NS)
        admin.create_group(f"{NS}%g2", namespace=NS)

    # given: nothing offloaded yet, every tier metric is there and at zero
    m = scrape(port)
    assert one(m, "mq_tier_bytes", tier="tiered") == 0
    assert one(m, "mq_tier_offloaded_segments_total") == 0
    assert one(m, "mq_tier_offload_failures_total") == 0
    assert one(m, "mq_tier_cold_read_hits_total") == one(m, "mq_tier_cold_read_misses_total") == 0

    # when: a little more than two segments are produced
    first = produce(broker, COUNT)
    # then: the scrape shows two segments offloaded and nothing waiting
    wait_for(
        "two offloaded segments in the metrics",
        lambda: one(scrape(port), "mq_tier_offloaded_segments_total") >= 2
        and one(scrape(port), "mq_tier_offload_lag_bytes") == 0,
    )
    m = scrape(port)
    assert one(m, "mq_tier_offloaded_segments_total") == 2
    assert one(m, "mq_tier_offload_lag_seconds") == 0
    # the tiered bytes are what the manifest in the S3 server lists, and every listed object is there
    objects = open_object_store(
        ObjectStoreSettings(
            url=f"s3://{BUCKET}/tier/broker-0",
            endpoint=moto.endpoint,
            region="us-east-1",
            access_key_id="test",
            secret_access_key="test",
        )
    )
    segments = json.loads(objects.get(MANIFEST_KEY))["segments"]
    assert [s["start"] for s in segments] == [0, SEGMENT]
    for s in segments:
        assert objects.head(commitlog_key(s["start"])).size == s["size"] == SEGMENT
        assert objects.head(cq_key(s["start"])).size == s["cq_size"]
        assert objects.head(index_key(s["start"])).size == s["index_size"]
    stored = sum(s["size"] + s["cq_size"] + s["index_size"] for s in segments)
    assert one(m, "mq_tier_bytes", tier="tiered") == stored
    assert one(m, "mq_tier_topic_bytes", topic=TOPIC, tier="tiered") == sum(
        s["topic_bytes"].get(TOPIC, 0) for s in segments
    )
    assert one(m, "mq_tier_topic_bytes", topic=TOPIC, tier="tiered") >= 2 * (SEGMENT - 2 * BODY)
    # hot retention 0: the offloaded segments left the disk; what is local is the active segment
    commitlog = broker.data_dir / "store" / "commitlog"
    assert one(m, "mq_tier_bytes", tier="local") == sum(f.stat().st_size for f in commitlog.iterdir())
    wait_for(  # per-topic local bytes are cached by the broker for a few seconds
        "the topic's local bytes to shrink to the active segment",
        lambda: 0 < one(scrape(port), "mq_tier_topic_bytes", topic=TOPIC, tier="local") <= SEGMENT,
        timeout=30,
    )
    # and the metrics agree with the admin API
    with TierAdminClient(broker.target) as tier:
        status = tier.status()
    assert (status.tiered_bytes, status.segments_offloaded) == (stored, 2)

    # when: a new group reads everything from offset 0, the offloaded part through ranged GETs
    consume_all(broker, "g1", first)
    m = scrape(port)
    hits = one(m, "mq_tier_cold_read_hits_total")
    misses = one(m, "mq_tier_cold_read_misses_total")
    # then: blocks were fetched, and the hit ratio is hits / (hits + misses)
    assert misses >= 2  # at least the first block of each cold segment
    assert hits > 0  # the read-ahead served the blocks after it
    assert one(m, "mq_tier_cold_read_hit_ratio") == pytest.approx(hits / (hits + misses))

    # when: the S3 server stops answering (SIGSTOP) and another segment fills up
    moto.pause()
    try:
        second = produce(broker, COUNT // 2 + 4)
        # then: offload passes fail and are counted; a sealed segment waits, and its age grows
        wait_for("failed offload passes", lambda: one(scrape(port), "mq_tier_offload_failures_total") > 0)
        m = scrape(port)
        assert one(m, "mq_tier_offloaded_segments_total") == 2
        assert one(m, "mq_tier_offload_lag_bytes") >= SEGMENT
        lag_s = one(m, "mq_tier_offload_lag_seconds")
        time.sleep(1.5)
        assert one(scrape(port), "mq_tier_offload_lag_seconds") >= lag_s + 1
    finally:
        moto.resume()
    # and once it is back the lag drains to zero and the counter moves on
    wait_for(
        "offload after the outage",
        lambda: one(scrape(port), "mq_tier_offload_lag_bytes") == 0
        and one(scrape(port), "mq_tier_offloaded_segments_total") >= 3,
    )
    assert one(scrape(port), "mq_tier_offload_lag_seconds") == 0
    consume_all(broker, "g2", first | second)
