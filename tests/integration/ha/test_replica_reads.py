"""Reads from replicas (RocketMQ's suggested read) in a group of real processes: a pull far behind
the CommitLog's end is answered by the master with records read from an in-sync replica, byte for
byte what it would read itself; with the replicas paused it reads its own disk, same answer."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.chaos.load import create_topic
from tests.integration.broker.conftest import V2
from tests.integration.ha.cluster import HABroker, HACluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUEUES = 4  # create_topic's queue count


def _counter(node: HABroker, name: str) -> float:
    match = re.search(rf"^{name}_total (\S+)$", node.metrics(), re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _pull_all(client: V2, topic: str, group: str, tag: str = "*") -> dict[int, list[pb.Message]]:
    """Every message of every queue from offset 0, through PullMessage in batches of 16."""
    out: dict[int, list[pb.Message]] = {}
    for qid in range(QUEUES):
        offset, got = 0, []
        while True:
            request = svc.PullMessageRequest(
                group=client.res(group),
                message_queue=pb.MessageQueue(topic=client.res(topic), id=qid),
                offset=offset,
                batch_size=16,
                filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression=tag),
            )
            request.long_polling_timeout.FromMilliseconds(0)
            frames = list(client.stub.PullMessage(request, metadata=client.md, timeout=20))
            batch = [f.message for f in frames if f.WhichOneof("content") == "message"]
            got += batch
            next_offset = frames[-1].next_offset
            if next_offset == offset:
                break
            offset = next_offset
        out[qid] = got
    return out


def _digest(pulled: dict[int, list[pb.Message]]) -> list[tuple[int, str, str, bytes, str, int]]:
    return [
        (
            qid,
            m.system_properties.message_id,
            m.system_properties.tag,
            m.body,
            m.system_properties.body_digest.checksum,
            m.system_properties.queue_offset,
        )
        for qid, batch in sorted(pulled.items())
        for m in batch
    ]


def test_far_behind_pulls_read_from_a_replica(tmp_path: Path) -> None:
    env = {
        "MQ_BROKER_MIN_IN_SYNC_REPLICAS": "2",
        # 16 KiB: everything but the newest few records counts as far behind
        "MQ_BROKER_REPLICA_READ_BEHIND_BYTES": str(16 << 10),
    }
    cluster = HACluster(tmp_path, size=3, env=env)
    try:
        cluster.start()
        master = cluster.wait_in_sync(3)
        create_topic(cluster, "history", "audit")
        producer = V2(master.target)
        sent = {}
        for i in range(200):
            body = os.urandom(700)
            reply = producer.send("history", body, tag="even" if i % 2 == 0 else "odd", keys=(f"k{i}",))
            assert reply.status.code == pb.Code.OK
            sent[reply.entries[0].message_id] = body
        cluster.wait_caught_up()  # every node holds the whole log

        reader = V2(master.target)
        pulled = _pull_all(reader, "history", "audit")
        # every message came back, byte for byte, in queue order
        assert {m.system_properties.message_id: m.body for b in pulled.values() for m in b} == sent
        for batch in pulled.values():
            assert [m.system_properties.queue_offset for m in batch] == list(range(len(batch)))
        from_replicas = _counter(master, "mq_broker_replica_read_messages")
        # all but the records within 16 KiB of the end (~23 of 200) came from a replica
        assert 150 <= from_replicas <= 200
        assert _counter(master, "mq_broker_replica_read_fallbacks") == 0
        # a tag filter is applied on the master: only the even ones, from the replica's bytes
        evens = _pull_all(reader, "history", "audit", tag="even")
        assert sum(len(b) for b in evens.values()) == 100
        assert all(m.system_properties.tag == "even" for b in evens.values() for m in b)
        assert _counter(master, "mq_broker_replica_read_messages") > from_replicas

        # with both replicas paused the master falls back to its own disk: the same answer
        replicas = [n for n in cluster.nodes if n is not master]
        for node in replicas:
            node.signal(signal.SIGSTOP)
        try:
            before = _counter(master, "mq_broker_replica_read_messages")
            started = time.monotonic()
            assert _digest(_pull_all(reader, "history", "audit")) == _digest(pulled)
            # one timeout per paused replica, then they are left alone
            assert time.monotonic() - started < 6
            assert _counter(master, "mq_broker_replica_read_fallbacks") == 2
            assert _counter(master, "mq_broker_replica_read_messages") == before
        finally:
            for node in replicas:
                node.signal(signal.SIGCONT)
    finally:
        cluster.close()
