"""Continuous produce against an HA group, following the master; and a full drain afterwards."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import grpc

from mqcloud.admin_client import BrokerAdminClient
from tests.integration.broker.conftest import V2, messages
from tests.integration.ha.cluster import HACluster

__all__ = ("Drained", "Producer", "create_topic", "drain")

OK = 20000


def create_topic(cluster: HACluster, topic: str, group: str) -> None:
    """Create on the master and wait until every running replica has it (META sync)."""
    master = cluster.wait_master()
    with BrokerAdminClient(master.target) as admin:
        admin.create_topic(topic, queue_count=4)
        admin.create_group(group)
    deadline = time.monotonic() + 10
    for node in cluster.nodes:
        while node.running:
            with BrokerAdminClient(node.target) as admin:
                names = {t.name for t in admin.list_topics()}
                groups = {g.name for g in admin.list_groups()}
            if topic in names and group in groups:
                break
            assert time.monotonic() < deadline, f"{node.node} never got {topic}/{group}"
            time.sleep(0.05)


@dataclass
class Producer:
    """Sends numbered messages in a thread; ``acked`` maps body -> the master that said SEND_OK."""

    cluster: HACluster
    topic: str
    acked: dict[bytes, str] = field(default_factory=dict)
    failures: dict[int, int] = field(default_factory=dict)
    # (sent, acknowledged, master) of every SEND_OK, monotonic seconds as this process saw them
    ack_times: list[tuple[float, float, str]] = field(default_factory=list)
    attempts: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)

    def _master(self) -> str | None:
        for node in self.cluster.nodes:
            if not node.running:
                continue
            try:
                st = node.status(0.5).node
            except grpc.RpcError:
                continue
            if st.role == "MASTER" and st.writable:
                return node.node
        return None

    def _run(self) -> None:
        client: V2 | None = None
        current = ""
        seq = 0
        while not self._stop.is_set():
            if client is None:
                name = self._master()
                if name is None:
                    time.sleep(0.05)
                    continue
                current = name
                client = V2(self.cluster.node(name).target)
            body = b"%08d:" % seq + os.urandom(24).hex().encode()
            seq += 1
            self.attempts += 1
            sent = time.monotonic()
            try:
                response = client.send(self.topic, body)
                code = response.status.code
            except grpc.RpcError:
                code = -1
            if code == OK:
                self.acked[body] = current
                self.ack_times.append((sent, time.monotonic(), current))
                continue
            self.failures[code] = self.failures.get(code, 0) + 1
            client.close()
            client = None
            time.sleep(0.02)
        if client is not None:
            client.close()

    def first_ack_after(self, t: float, node: str) -> float | None:
        for _, when, who in self.ack_times:
            if when >= t and who == node:
                return when
        return None


@dataclass
class Drained:
    bodies: dict[bytes, int]

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.bodies.values())


def drain(target: str, topic: str, group: str, idle_rounds: int = 3) -> Drained:
    """Receive and ack everything the topic holds (from the group's committed offset)."""
    client = V2(target)
    seen: dict[bytes, int] = {}
    idle = 0
    try:
        while idle < idle_rounds:
            got = messages(client.receive(group, topic, batch=64, poll_s=0.5, invisible_s=60))
            if not got:
                idle += 1
                continue
            idle = 0
            for msg in got:
                seen[msg.body] = seen.get(msg.body, 0) + 1
                client.ack(group, topic, msg)
    finally:
        client.close()
    return Drained(seen)
