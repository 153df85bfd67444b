"""Prometheus metrics with tenant, topic and group labels on a real broker."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.conftest import free_port
from tests.integration.broker.conftest import V2, BrokerProcess, messages

from .conftest import ADMIN_TOKEN, FAST_METERING, client, tenant

pytestmark = pytest.mark.integration


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_tenant_labelled_metrics(tmp_path: Path) -> None:
    port = free_port()
    broker = BrokerProcess(
        tmp_path / "broker", free_port(), dev=False, env=FAST_METERING, metrics_listen=f"127.0.0.1:{port}"
    )
    broker.start()
    try:
        with BrokerAdminClient(broker.target, token=ADMIN_TOKEN) as op:
            creds = tenant(op, "acme")
            op.put_quota("acme", {"produce_messages_per_s": 2})
        v2 = client(broker, "acme", creds)
        try:
            codes = [v2.send("orders", b"12345").status.code for _ in range(6)]
            got = messages(v2.receive("billing", "orders", poll_s=1))
            assert (
                client(broker, "acme", ("AKacme", "bad")).send("orders").status.code == pb.Code.UNAUTHORIZED
            )
        finally:
            v2.close()
        accepted = codes.count(pb.Code.OK)
        assert 0 < accepted < 6 and len(got) == accepted
        time.sleep(1.5)  # one lag sample after the receive
        m = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
        acme_orders = frozenset({("tenant", "acme"), ("topic", "orders")})
        assert m[("mq_tenant_messages_in_total", acme_orders)] == accepted
        assert m[("mq_tenant_bytes_in_total", acme_orders)] == 5 * accepted
        out = acme_orders | {("group", "billing")}
        assert m[("mq_tenant_messages_out_total", out)] == accepted
        assert (
            m[("mq_tenant_throttled_total", frozenset({("tenant", "acme"), ("kind", "produce")}))]
            == 6 - accepted
        )
        assert m[("mq_tenant_send_seconds_count", frozenset({("tenant", "acme")}))] == accepted
        assert m[("mq_broker_auth_refused_total", frozenset({("code", "40100")}))] >= 1
        assert m[("mq_tenant_connected_clients", frozenset({("tenant", "acme")}))] >= 1
        # received but not acked: still behind the committed offset
        assert m[("mq_tenant_consumer_lag_messages", out)] == accepted
        assert m[("mq_broker_store_running", frozenset())] == 1
        # start-up objects frozen out of full collections (dataplane/heap.py), collections timed
        assert m[("mq_gc_frozen_objects", frozenset())] > 10_000
        assert m[("mq_gc_pause_seconds_count", frozenset({("generation", "0")}))] >= 1
    finally:
        broker.kill()


def test_no_tenant_traffic_has_no_tenant_series(tmp_path: Path) -> None:
    """Messages of a topic outside any namespace (a development broker) are counted per topic, and
    in neither direction under an empty tenant label: sends used to be, deliveries never were."""
    port = free_port()
    broker = BrokerProcess(tmp_path / "broker", free_port(), metrics_listen=f"127.0.0.1:{port}")
    broker.start()
    try:
        with BrokerAdminClient(broker.target) as op:
            op.create_topic("plain", queue_count=1)
            op.create_group("readers")
        v2 = V2(broker.target)
        try:
            assert [v2.send("plain", b"abc").status.code for _ in range(3)] == [pb.Code.OK] * 3
            assert len(messages(v2.receive("readers", "plain", poll_s=1))) == 3
        finally:
            v2.close()
        m = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
        assert m[("mq_broker_messages_in_total", frozenset({("topic", "plain")}))] == 3
        tenant_series = [key for key in m if key[0].startswith("mq_tenant_") and ("tenant", "") in key[1]]
        assert tenant_series == []
    finally:
        broker.kill()
