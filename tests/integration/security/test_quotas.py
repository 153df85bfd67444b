"""Quotas on real brokers: rates within +-10% (one node and two), storage, size and connections."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.conftest import free_port
from tests.integration.broker.conftest import V2, BrokerProcess, messages, status_code

from .conftest import ADMIN_TOKEN, FAST_METERING, client, secure_broker_process, tenant

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OK, TOO_MANY = pb.Code.OK, pb.Code.TOO_MANY_REQUESTS
WARMUP_S, WINDOW_S = 1.0, 4.0


def _measure(workers: list[Callable[[], int]], per_worker: int = 1) -> tuple[float, set[int]]:
    """Run the workers (each returns a status code per call) for warm-up + window; accepted/s in
    the window, and the codes seen. The window opens once the bucket's burst is drained: after the
    warm-up and after the first refusal, since a client slowed by a loaded machine may take longer
    than the warm-up to spend the burst (its leftover would count as rate)."""
    start = time.monotonic()
    accepted: list[float] = []
    codes: set[int] = set()
    refused: list[float] = []
    lock = threading.Lock()

    def loop(work: Callable[[], int]) -> None:
        while (now := time.monotonic()) < start + WARMUP_S + WINDOW_S:
            code = work()
            with lock:
                codes.add(code)
                if code == OK:
                    accepted.append(now)
                elif code == TOO_MANY:
                    refused.append(now)
            if code == TOO_MANY:
                time.sleep(0.002)  # refused at once; do not spin the client's CPU

    threads = [threading.Thread(target=loop, args=(w,)) for w in workers for _ in range(per_worker)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = start + WARMUP_S + WINDOW_S
    opens = max(start + WARMUP_S, min(refused, default=start))
    assert end - opens >= WINDOW_S / 2, "the burst took most of the window to drain"
    in_window = [t for t in accepted if opens <= t < end]
    return len(in_window) / (end - opens), codes


@pytest.mark.parametrize(
    ("limits", "body", "expected"),
    [
        pytest.param({"produce_messages_per_s": 100}, b"m", 100, id="messages"),
        pytest.param({"produce_bytes_per_s": 60_000}, b"b" * 1000, 60, id="bytes"),
    ],
)
def test_produce_rate_holds_within_ten_percent(
    secure_broker: BrokerProcess, op: BrokerAdminClient, limits: dict[str, int], body: bytes, expected: int
) -> None:
    creds = tenant(op, "acme")
    op.put_quota("acme", limits)
    clients = [client(secure_broker, "acme", creds) for _ in range(3)]
    try:
        rate, codes = _measure([lambda c=c: c.send("orders", body).status.code for c in clients])
    finally:
        for c in clients:
            c.close()
    assert codes == {OK, TOO_MANY}
    assert expected * 0.9 <= rate <= expected * 1.1, rate


def test_consume_rate_of_a_group_holds_within_ten_percent(
    secure_broker: BrokerProcess, op: BrokerAdminClient
) -> None:
    creds = tenant(op, "acme")
    op.put_quota("acme", {"consume_messages_per_s": 40}, group="acme%billing")
    producer = client(secure_broker, "acme", creds)
    for i in range(400):
        assert producer.send("orders", f"m{i}".encode()).status.code == OK
    consumers = [client(secure_broker, "acme", creds) for _ in range(2)]

    try:
        start = time.monotonic()
        received: list[tuple[float, int]] = []
        lock = threading.Lock()

        def loop(c: V2) -> None:
            while (now := time.monotonic()) < start + WARMUP_S + WINDOW_S:
                frames = c.receive("billing", "orders", batch=16, poll_s=0.2)
                got = messages(frames)
                with lock:
                    received.append((now, len(got)))
                for m in got:
                    c.ack("billing", "orders", m)
                if status_code(frames) == TOO_MANY:
                    time.sleep(0.002)

        threads = [threading.Thread(target=loop, args=(c,)) for c in consumers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for c in [producer, *consumers]:
            c.close()
    in_window = sum(n for t, n in received if start + WARMUP_S <= t < start + WARMUP_S + WINDOW_S)
    rate = in_window / WINDOW_S
    assert 40 * 0.9 <= rate <= 40 * 1.1, rate


def test_a_tenant_limit_holds_in_aggregate_over_two_nodes(tmp_path: Path) -> None:
    # given: two nodes serving the tenant, each told it is one of two (quota_nodes=2)
    nodes = [
        secure_broker_process(
            tmp_path / f"b{i}", MQ_BROKER_QUOTA_NODES="2", MQ_BROKER_BROKER_NAME=f"node-{i}"
        )
        for i in range(2)
    ]
    clients: list[V2] = []
    try:
        for node in nodes:
            node.start()
            with BrokerAdminClient(node.target, token=ADMIN_TOKEN) as admin:
                creds = tenant(admin, "acme")
                admin.put_quota("acme", {"produce_messages_per_s": 120})
            clients += [client(node, "acme", creds) for _ in range(2)]
        # when: producers send to both nodes as fast as they can
        rate, codes = _measure([lambda c=c: c.send("orders").status.code for c in clients])
    finally:
        for c in clients:
            c.close()
        for node in nodes:
            node.kill()
    # then: the sum over the nodes is the tenant's limit
    assert codes == {OK, TOO_MANY}
    assert 120 * 0.9 <= rate <= 120 * 1.1, rate


def test_storage_size_and_connection_limits(secure_broker: BrokerProcess, op: BrokerAdminClient) -> None:
    creds = tenant(op, "acme")
    op.put_quota("acme", {"storage_bytes": 30_000, "max_message_bytes": 2000, "max_connections": 2})
    v2 = client(secure_broker, "acme", creds)
    try:
        # max message size of the plan
        too_big = v2.send("orders", b"x" * 2001)
        assert too_big.status.code == pb.Code.MESSAGE_BODY_TOO_LARGE
        assert "2000" in too_big.status.message
        # storage: produce is refused once the tenant holds its quota, with a message saying so
        codes = [v2.send("orders", b"s" * 1500).status for _ in range(40)]
        assert codes[0].code == pb.Code.OK
        refused = [s for s in codes if s.code != pb.Code.OK]
        assert refused and {s.code for s in refused} == {pb.Code.FORBIDDEN}
        assert "storage quota exceeded" in refused[0].message
        assert 10 <= codes.index(refused[0]) <= 21  # 30 000 bytes of ~1.5 KiB records
        # connections: a third distinct client of the namespace is refused, known ones go on
        second = client(secure_broker, "acme", creds)
        third = client(secure_broker, "acme", creds)
        try:
            assert second.receive("billing", "orders", poll_s=0.1, batch=1)
            assert status_code(third.receive("billing", "orders", poll_s=0.1)) == TOO_MANY
            assert v2.send("orders", b"x").status.code == pb.Code.FORBIDDEN  # still storage-full
        finally:
            second.close()
            third.close()
    finally:
        v2.close()


def _share(metrics_port: int, ns: str) -> float | None:
    """``mq_tenant_quota_share{tenant=ns}`` from a node's metrics endpoint (None while absent)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f'mq_tenant_quota_share{{tenant="{ns}"}}'):
            return float(line.split()[-1])
    return None


def test_a_tenant_limit_splits_by_each_nodes_share_of_its_queues(tmp_path: Path) -> None:
    # given: two nodes that know each other; acme has 3 queues on node-0 and 1 on node-1
    ports = [free_port() for _ in range(2)]
    metrics = [free_port() for _ in range(2)]
    nodes = [
        BrokerProcess(
            tmp_path / f"b{i}",
            ports[i],
            dev=False,
            metrics_listen=str(metrics[i]),
            env={
                **FAST_METERING,
                "MQ_BROKER_BROKER_NAME": f"node-{i}",
                "MQ_BROKER_QUOTA_PEERS": json.dumps([f"127.0.0.1:{ports[1 - i]}"]),
                "MQ_BROKER_QUOTA_REBALANCE_S": "0.5",
            },
        )
        for i in range(2)
    ]
    clients: list[list[V2]] = []
    try:
        for i, node in enumerate(nodes):
            node.start()
            with BrokerAdminClient(node.target, token=ADMIN_TOKEN) as admin:
                admin.create_topic("acme%orders", queue_count=3 if i == 0 else 1, namespace="acme")
                admin.put_access_key("AKacme", secret_key="secret-of-acme", namespace="acme")
                admin.put_quota("acme", {"produce_messages_per_s": 120})
            clients.append([client(node, "acme", ("AKacme", "secret-of-acme")) for _ in range(2)])
        deadline = time.monotonic() + 20
        while [_share(m, "acme") for m in metrics] != [0.75, 0.25]:
            assert time.monotonic() < deadline, [_share(m, "acme") for m in metrics]
            time.sleep(0.2)
        # when: producers send to both nodes as fast as they can, at the same time
        rates: dict[int, float] = {}

        def measure(i: int) -> None:
            rates[i], _ = _measure([lambda c=c: c.send("orders").status.code for c in clients[i]])

        threads = [threading.Thread(target=measure, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for pair in clients:
            for c in pair:
                c.close()
        for node in nodes:
            node.kill()
    # then: each node admits its queue share of the limit, and the sum is the limit
    assert 90 * 0.9 <= rates[0] <= 90 * 1.1, rates
    assert 30 * 0.9 <= rates[1] <= 30 * 1.1, rates
    assert 120 * 0.9 <= rates[0] + rates[1] <= 120 * 1.1, rates
