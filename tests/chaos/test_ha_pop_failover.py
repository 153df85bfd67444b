"""Chaos: consumers across master SIGKILLs. POP state replicates through the CommitLog, so after
each failover a message received on a dead master stays invisible until its invisible time ends,
an acked message is never delivered again, and receipt handles from earlier masters still ack."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.chaos.load import create_topic
from tests.integration.broker.conftest import V2, messages
from tests.integration.ha.cluster import HABroker, HACluster

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.slow]

ENV = {"MQ_BROKER_MIN_IN_SYNC_REPLICAS": "2"}
ROUNDS = min(int(os.environ.get("MQ_CHAOS_ROUNDS", "10")), 4)  # each round holds messages 60 s
INVISIBLE_S = 90
TOTAL = 240


def test_pop_state_across_master_kills(tmp_path: Path) -> None:
    cluster = HACluster(tmp_path, size=3, env=ENV)
    try:
        cluster.start()
        master: HABroker = cluster.wait_in_sync(3)
        create_topic(cluster, "jobs", "workers")
        producer = V2(master.target)
        for i in range(TOTAL):
            assert producer.send("jobs", b"job-%04d" % i).status.code == pb.Code.OK
        acked: set[bytes] = set()
        held: dict[bytes, tuple[pb.Message, float]] = {}  # received, not acked: (message, deadline)
        violations: list[str] = []
        for round_ in range(ROUNDS):
            # given a consumer on the master that acks every other message it receives
            consumer = V2(master.target)
            got = 0
            while got < 30:
                batch = messages(consumer.receive("workers", "jobs", batch=16, invisible_s=INVISIBLE_S))
                now = time.time()
                for m in batch:
                    if m.body in acked:
                        violations.append(f"round {round_}: acked {m.body!r} delivered again")
                    elif m.body in held and now < held[m.body][1] - 1:
                        violations.append(f"round {round_}: {m.body!r} delivered while invisible")
                    got += 1
                    if got % 2:
                        assert consumer.ack("workers", "jobs", m).status.code == pb.Code.OK
                        acked.add(m.body)
                        held.pop(m.body, None)
                    else:
                        held[m.body] = (m, now + INVISIBLE_S)
            cluster.wait_caught_up()
            # when the master is killed and comes back as a replica
            master.signal(signal.SIGKILL)
            master.proc.wait(10)  # type: ignore[union-attr]
            new = cluster.wait_master(exclude=master.node, timeout=20)
            master.start()
            master = cluster.wait_in_sync(3, timeout=30)
            assert master is new
        # then no acked message came back and no held one came back early
        assert not violations, violations[:5]
        # and the handles issued by the earlier masters ack on the current one
        consumer = V2(master.target)
        for body, (m, _) in sorted(held.items()):
            assert consumer.ack("workers", "jobs", m).status.code == pb.Code.OK, body
            acked.add(body)
        # and the rest of the messages are delivered once each, nothing lost
        deadline = time.monotonic() + 30
        while len(acked) < TOTAL and time.monotonic() < deadline:
            for m in messages(consumer.receive("workers", "jobs", batch=32, poll_s=1)):
                assert m.body not in acked, f"{m.body!r} delivered again"
                assert consumer.ack("workers", "jobs", m).status.code == pb.Code.OK
                acked.add(m.body)
        assert acked == {b"job-%04d" % i for i in range(TOTAL)}
    finally:
        cluster.close()
