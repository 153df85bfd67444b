"""Real processes: the replication port refuses peers without the group secret, and the master's
Prometheus endpoint shows replication health (lag, in-sync flag, epoch) as it changes."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dataplane.ha.framing import FrameType, read_frame, write_json
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.chaos.load import create_topic
from tests.integration.broker.conftest import V2
from tests.integration.ha.cluster import HABroker, HACluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _samples(node: HABroker) -> dict[tuple[str, str], float]:
    """(metric name, replica label or "") -> value of this node's mq_ha_* series."""
    out = {}
    for family in text_string_to_metric_families(node.metrics()):
        if family.name.startswith("mq_ha_"):
            for s in family.samples:
                out[(s.name, s.labels.get("replica", ""))] = s.value
    return out


def _until(predicate: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.1)


async def _raw_peer(port: int) -> list[FrameType]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    hello = {"group": "group-a", "node": "intruder", "epochs": [], "max_offset": 0}
    write_json(writer, FrameType.HELLO, hello)
    await writer.drain()
    kinds = []
    try:
        while True:
            kind, _ = await asyncio.wait_for(read_frame(reader), 5)
            kinds.append(kind)
    except asyncio.IncompleteReadError:
        pass
    writer.close()
    return kinds


def test_wrong_secret_is_refused_and_metrics_follow_replication(tmp_path: Path) -> None:
    env = {"MQ_BROKER_HA_IN_SYNC_TIMEOUT_MS": "1000"}
    cluster = HACluster(tmp_path, size=2, env=env)
    # a third node of the group configured with another secret
    intruder = HABroker(
        tmp_path / "n2",
        "group-a",
        "n2",
        cluster.nodes[0].controllers,
        {**env, "MQ_BROKER_HA_SECRET": "not-the-group-secret"},
    )
    try:
        cluster.start()
        master = cluster.wait_in_sync(2)
        intruder.start()
        replica = next(n for n in cluster.nodes if n is not master)
        create_topic(cluster, "t", "g")
        producer = V2(master.target)
        for i in range(20):
            assert producer.send("t", b"x" * 1000 + b"%d" % i).status.code == pb.Code.OK
        # the replica with the secret catches up; lag 0, in sync, epoch 1 on the master's endpoint
        _until(lambda: _samples(master).get(("mq_ha_replica_lag_bytes", replica.node)) == 0)
        samples = _samples(master)
        assert samples[("mq_ha_replica_in_sync", replica.node)] == 1
        assert 0 < samples[("mq_ha_replica_lag_p99_seconds", replica.node)] < 1
        assert samples[("mq_ha_epoch", "")] == 1
        assert samples[("mq_ha_master", "")] == 1
        max_offset = master.status().node.max_offset
        assert samples[("mq_ha_replica_confirmed_offset_bytes", replica.node)] == max_offset
        # the node with the wrong secret is refused: no byte of the CommitLog, no topic (META), no
        # series on the master, a log line on both sides
        _until(lambda: _samples(master)[("mq_ha_auth_failures", "")] >= 1)
        assert intruder.status().node.max_offset == 0
        assert intruder.status().node.role == "REPLICA"
        with BrokerAdminClient(intruder.target) as admin:
            assert admin.list_topics() == []
        assert ("mq_ha_replica_lag_bytes", intruder.node) not in _samples(master)
        assert any("authentication failed" in line for line in master.output)
        assert any("refused: authentication failed" in line for line in intruder.output)
        assert _samples(intruder)[("mq_ha_master", "")] == 0
        # a raw socket gets the challenge and a refusal, nothing else
        assert asyncio.run(_raw_peer(master.ha_port)) == [FrameType.CHALLENGE, FrameType.REFUSE]
        # when the replica stops answering, its lag grows and it leaves the in-sync set
        replica.signal(signal.SIGSTOP)
        for i in range(10):
            assert producer.send("t", b"y" * 1000 + b"%d" % i).status.code == pb.Code.OK
        _until(lambda: _samples(master)[("mq_ha_replica_in_sync", replica.node)] == 0)
        samples = _samples(master)
        lag = samples[("mq_ha_replica_lag_bytes", replica.node)]
        assert lag > 10_000  # most of the 10 x 1 KB sent while it was stopped
        assert (
            lag
            == samples[("mq_ha_max_offset_bytes", "")]
            - (samples[("mq_ha_replica_confirmed_offset_bytes", replica.node)])
        )
        # and once it resumes it catches up again
        replica.signal(signal.SIGCONT)
        _until(lambda: _samples(master).get(("mq_ha_replica_in_sync", replica.node)) == 1)
        assert _samples(master)[("mq_ha_replica_lag_bytes", replica.node)] == 0
    finally:
        intruder.kill()
        cluster.close()
