"""``make soak``: the production topology under load and faults, then proof that nothing was lost.

    uv run python scripts/soak.py --duration 30m --report docs/reliability.md
    uv run python scripts/soak.py --duration 3m --fault-interval 40   # the variant make test runs

On loopback (``scripts/cluster_local.py``): PostgreSQL, Redis, an S3 protocol server (moto) for
tiered storage, a controller pair, one broker group of three nodes with minInSyncReplicas=2, the
control plane under gunicorn and Celery. Several tenants are provisioned through the REST API; each
has a producer (our SDK, signed with the tenant's key) sending numbered, checksummed messages and a
SimpleConsumer receiving and acking them. Every ``--fault-interval`` a fault injector SIGKILLs
(restarting it a few seconds later) or SIGSTOPs (then SIGCONTs) a random broker or controller.

At the end, with faults stopped, consumers drain until every message that got SEND_OK arrived, and
the run checks: none missing, none corrupt (sequence number and checksum per producer), duplicates
counted, and no broker's memory growing without bound. A summary table is printed (and written to
``--report``). Exit status 0 only when every check holds.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

# Run as a script: its own directory is on sys.path (cluster_local.py is its neighbour).
from cluster_local import (
    BIN,
    REPO,
    Cluster,
    Topology,
    _signal,
    cluster_down,
    cluster_up,
    read_env_file,
    wait_gone,
)

__all__ = ("Fault", "SoakResult", "main", "run_soak")

# A broker's heap (anonymous resident memory; mapped CommitLog pages are the page cache's, not the
# process's) may at most double (plus this slack) between its first sample after a warm-up and the
# end of that incarnation: caches fill early, a leak keeps growing.
MEMORY_SLACK_BYTES = 128 << 20
WARMUP_S = 30.0
# An incarnation judged must have lived this long after its warm-up: a node restarted in the last
# minute is still catching up, and two samples that close say nothing about a leak.
MEMORY_JUDGE_MIN_S = 120.0
PAYLOAD_BYTES = 256
# A node-by-node upgrade keeps the group available: a producer may wait for one failover of the
# master (the controller's master timeout plus a route refresh), never longer.
UPGRADE_MAX_ACK_GAP_S = 15.0
# A node being upgraded must have stopped this long after its SIGTERM (its own stop is bounded well
# below this: dataplane/server.py).
UPGRADE_STOP_S = 60.0


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``3m``, ``1h`` -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    text = text.strip().lower()
    if text and text[-1] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


#
# Messages: "<tenant>|<seq>|<payload>|<sha256 of the rest>"
#


def make_body(tenant: str, seq: int) -> bytes:
    head = f"{tenant}|{seq:010d}|{os.urandom(PAYLOAD_BYTES // 2).hex()}".encode()
    return head + b"|" + hashlib.sha256(head).hexdigest()[:32].encode()


def check_body(body: bytes) -> tuple[str, int] | None:
    """(tenant, seq) of an intact body; None when the checksum does not match."""
    head, _, digest = body.rpartition(b"|")
    if hashlib.sha256(head).hexdigest()[:32].encode() != digest:
        return None
    tenant, seq, _ = head.decode(errors="replace").split("|", 2)
    return tenant, int(seq)


#
# Load
#


@dataclass
class TenantLoad:
    """One tenant's producer and consumer threads and what they saw."""

    namespace: str
    config: Any  # mqcloud.ClientConfig
    topic: str
    group: str
    rate: float
    acked: dict[int, bytes] = field(default_factory=dict)
    ack_times: list[float] = field(default_factory=list)
    received: dict[int, int] = field(default_factory=dict)
    mismatched: int = 0
    corrupt: int = 0
    send_errors: dict[str, int] = field(default_factory=dict)
    receive_errors: int = 0
    attempts: int = 0
    _stop_producing: threading.Event = field(default_factory=threading.Event)
    _stop_consuming: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for target in (self._produce, self._consume):
            thread = threading.Thread(target=target, name=f"soak-{self.namespace}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop_producing(self) -> None:
        self._stop_producing.set()
        self._threads[0].join(60)

    def stop_consuming(self) -> None:
        self._stop_consuming.set()
        self._threads[1].join(60)

    @property
    def missing(self) -> list[int]:
        return sorted(seq for seq in self.acked if seq not in self.received)

    @property
    def longest_ack_gap_s(self) -> float:
        """The longest time between two SEND_OKs: how long producing was unavailable."""
        times = self.ack_times
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.received.values() if n > 1)

    def _produce(self) -> None:
        from mqcloud import Message, MQClientError, Producer

        seq = 0
        interval = 1.0 / self.rate
        producer: Any = None
        next_at = time.monotonic()
        while not self._stop_producing.is_set():
            try:
                if producer is None:
                    producer = Producer(self.config, topics=[self.topic], max_attempts=5).start()
                body = make_body(self.namespace, seq)
                self.attempts += 1
                producer.send(Message(self.topic, body), timeout=30)
                self.acked[seq] = body
                self.ack_times.append(time.monotonic())
            except (MQClientError, TimeoutError, OSError) as exc:
                name = type(exc).__name__
                self.send_errors[name] = self.send_errors.get(name, 0) + 1
                time.sleep(0.2)
            seq += 1
            next_at = max(next_at + interval, time.monotonic() - 1.0)
            time.sleep(max(0.0, next_at - time.monotonic()))
        if producer is not None:
            producer.shutdown()

    def _consume(self) -> None:
        from mqcloud import MQClientError, SimpleConsumer

        consumer: Any = None
        while not self._stop_consuming.is_set():
            try:
                if consumer is None:
                    consumer = SimpleConsumer(
                        self.config, self.group, {self.topic: "*"}, await_duration=3
                    ).start()
                for message in consumer.receive(32, 30):
                    self._record(message.body)
                    try:
                        consumer.ack(message)
                    except MQClientError:
                        pass  # it comes back after its invisible time: counted as a duplicate
            except (MQClientError, TimeoutError, OSError):
                self.receive_errors += 1
                time.sleep(0.5)
        if consumer is not None:
            consumer.shutdown()

    def _record(self, body: bytes) -> None:
        found = check_body(body)
        if found is None or found[0] != self.namespace:
            self.corrupt += 1
            return
        seq = found[1]
        self.received[seq] = self.received.get(seq, 0) + 1
        sent = self.acked.get(seq)
        if sent is not None and sent != body:
            self.mismatched += 1


#
# Faults
#


@dataclass
class Fault:
    at_s: float
    target: str
    action: str  # "SIGKILL" or "SIGSTOP"
    down_s: float
    recovered_s: float | None = None


class Processes:
    """Finds, signals and restarts the cluster's brokers and controllers by their recorded PIDs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cluster = Cluster(root)
        self.cluster.started = [p.stem for p in sorted((root / "pids").glob("*.pid"))]

    def pid(self, name: str) -> int:
        files = sorted(self.root.glob(f"pids/*-{name}.pid"))
        return int(files[-1].read_text().strip())

    def targets(self) -> list[str]:
        names = {p.stem.split("-", 1)[1] for p in (self.root / "pids").glob("*.pid")}
        return sorted(n for n in names if n.startswith(("broker-", "controller-")))

    def brokers(self) -> list[str]:
        return [t for t in self.targets() if t.startswith("broker-")]

    def restart(self, name: str) -> None:
        base = self.cluster.base_env()
        if name.startswith("controller-"):
            env = {**base, **read_env_file(self.root / "config" / f"{name}.env")}
            self.cluster.spawn(name, [str(BIN / "mqctl"), "controller", "start"], env)
        else:
            env = {**base, **read_env_file(self.root / "config" / "broker.env")}
            config = self.root / "config" / f"{name}.toml"
            self.cluster.spawn(name, [str(BIN / "mqctl"), "broker", "start", "--config", str(config)], env)


def _log_tail(path: Path, lines: int = 200) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({path}: {exc})"


def rss_bytes(pid: int) -> int | None:
    """Anonymous resident memory (heap, stacks) of a process, or None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
        return None
    return None


def _node_status(state: dict[str, Any], endpoint: str) -> Any:
    """One broker's HA view (``GetClusterStatus().node``), or None when it does not answer."""
    import grpc

    from mqcloud.admin.v1 import cluster_pb2, cluster_pb2_grpc

    with grpc.insecure_channel(endpoint) as channel:
        try:
            return (
                cluster_pb2_grpc.ClusterAdminStub(channel)
                .GetClusterStatus(
                    cluster_pb2.GetClusterStatusRequest(),
                    metadata=[("authorization", f"Bearer {state['admin_token']}")],
                    timeout=2,
                )
                .node
            )
        except grpc.RpcError:
            return None


def _writable_masters(state: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (member["name"], node)
        for members in state["broker_groups"].values()
        for member in members
        if (node := _node_status(state, member["endpoint"])) is not None
        and node.role == "MASTER"
        and node.writable
    ]


def healthy(state: dict[str, Any], copies: int) -> bool:
    """A writable master with ``copies`` nodes in its SyncStateSet."""
    return any(len(node.sync_state_set) >= copies for _, node in _writable_masters(state))


def rejoined(state: dict[str, Any], name: str) -> bool:
    """The node ``name`` runs again: as a replica that the master counts in sync (a new connection:
    the master dropped it when the old one went away), or as the writable master when it came back
    before the controller's master timeout and kept its role."""
    endpoint = next(m["endpoint"] for ms in state["broker_groups"].values() for m in ms if m["name"] == name)
    own = _node_status(state, endpoint)
    if own is None or own.role not in ("MASTER", "REPLICA"):
        return False
    if own.role == "MASTER":  # back before the controller's master timeout: still the master
        return bool(own.writable)
    return any(
        r.node == name and r.in_sync for _, master in _writable_masters(state) for r in master.replicas
    )


def describe_group(state: dict[str, Any]) -> str:
    """One line per broker: its role, whether it takes writes, its epoch and CommitLog end, the master
    and SyncStateSet it knows and, on a master, its replicas with their lag and whether it counts
    them in sync."""
    lines = []
    for members in state["broker_groups"].values():
        for member in members:
            node = _node_status(state, member["endpoint"])
            if node is None:
                lines.append(f"soak: {member['name']}: no answer")
                continue
            replicas = ", ".join(f"{r.node} in_sync={r.in_sync} lag={r.lag_bytes}" for r in node.replicas)
            lines.append(
                f"soak: {member['name']}: {node.role} writable={node.writable} epoch={node.epoch} "
                f"max={node.max_offset} master={node.master} sss={list(node.sync_state_set)} "
                f"replicas=[{replicas}]"
            )
    return "\n".join(lines)


def wait_rejoined(state: dict[str, Any], name: str, timeout: float) -> float | None:
    """Seconds until ``name`` rejoined and the group is whole again, or None after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if rejoined(state, name) and healthy(state, 3):
            return time.monotonic() - start
        time.sleep(0.5)
    return None


def master_name(state: dict[str, Any]) -> str | None:
    masters = _writable_masters(state)
    return masters[0][0] if masters else None


def wait_healthy(state: dict[str, Any], copies: int, timeout: float) -> float | None:
    """Seconds until healthy, or None after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if healthy(state, copies):
            return time.monotonic() - start
        time.sleep(0.5)
    return None


class FaultInjector(threading.Thread):
    """One fault at a time, every ``interval`` seconds; each one undone before the next."""

    def __init__(
        self, procs: Processes, state: dict[str, Any], interval: float, seed: int, t0: float
    ) -> None:
        super().__init__(name="soak-faults", daemon=True)
        self.procs = procs
        self.state = state
        self.interval = interval
        self.random = random.Random(seed)
        self.t0 = t0
        self.faults: list[Fault] = []
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(180)

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            target = self.random.choice(self.procs.targets())
            action = self.random.choice(("SIGKILL", "SIGKILL", "SIGSTOP"))
            down = self.random.uniform(3.0, 8.0)
            fault = Fault(round(time.monotonic() - self.t0, 1), target, action, round(down, 1))
            self.faults.append(fault)
            pid = self.procs.pid(target)
            print(f"soak: t={fault.at_s:.0f}s {action} {target} (pid {pid}) for {down:.1f}s", flush=True)
            if action == "SIGKILL":
                _signal(pid, signal.SIGKILL)
                time.sleep(down)
                self.procs.restart(target)
            else:
                _signal(pid, signal.SIGSTOP)
                time.sleep(down)
                _signal(pid, signal.SIGCONT)
            # recovered: the master has every node (the restarted one too) in its SyncStateSet
            if target.startswith("broker-"):
                recovered = wait_rejoined(self.state, target, 120)
            else:
                recovered = wait_healthy(self.state, 3, 120)
            fault.recovered_s = None if recovered is None else round(down + recovered, 1)
            if recovered is None:  # what the nodes think of each other, and what they logged meanwhile
                print(f"soak: not recovered from {action} {target} within 120 s", flush=True)
                print(describe_group(self.state), flush=True)
                for node in self.procs.brokers():
                    print(f"soak: the end of {node}'s log:", flush=True)
                    print(_log_tail(self.procs.root / "logs" / f"{node}.log", 60), flush=True)


class RollingRestart(threading.Thread):
    """An upgrade, node by node: after ``interval`` s, each broker in turn is stopped gracefully
    (SIGTERM), started again on the same data and config, and rejoins the SyncStateSet before the
    next one goes. Same interface as :class:`FaultInjector`."""

    def __init__(self, procs: Processes, state: dict[str, Any], interval: float, t0: float) -> None:
        super().__init__(name="soak-upgrade", daemon=True)
        self.procs = procs
        self.state = state
        self.interval = interval
        self.t0 = t0
        self.faults: list[Fault] = []
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(600)

    def run(self) -> None:
        if self._halt.wait(self.interval):
            return
        # Replicas first, the master last: one failover for the whole upgrade.
        master = master_name(self.state)
        for node in sorted(self.procs.brokers(), key=lambda name: name == master):
            started = time.monotonic()
            fault = Fault(round(started - self.t0, 1), node, "SIGTERM+restart", 0.0)
            self.faults.append(fault)
            pid = self.procs.pid(node)
            print(f"soak: t={fault.at_s:.0f}s upgrading {node} (pid {pid})", flush=True)
            _signal(pid, signal.SIGTERM)
            stopped = wait_gone(pid, UPGRADE_STOP_S)
            fault.down_s = round(time.monotonic() - started, 1)
            if not stopped:  # a failed upgrade; killed so that the restart finds its port and store
                fault.action += f" (still running after {UPGRADE_STOP_S:.0f} s: SIGKILL)"
                _signal(pid, signal.SIGUSR2)  # the broker writes every thread's stack to its log
                time.sleep(1)
                _signal(pid, signal.SIGKILL)
                wait_gone(pid, 10)
            self.procs.restart(node)
            recovered = wait_rejoined(self.state, node, 120)
            if recovered is not None and stopped:
                fault.recovered_s = round(time.monotonic() - started, 1)
            else:
                print(f"soak: {node} failed its upgrade; the end of its log:", flush=True)
                print(_log_tail(self.procs.root / "logs" / f"{node}.log"), flush=True)
                return


#
# The run
#


@dataclass
class SoakResult:
    duration_s: float
    tenants: list[TenantLoad]
    faults: list[Fault]
    memory: dict[str, tuple[int, int, int]]  # node -> (after warm-up, end, max) bytes
    memory_growing: list[str]
    # Rolling restart: the longest a producer may go without a SEND_OK (None: not checked).
    max_ack_gap_s: float | None = None

    @property
    def available(self) -> bool:
        limit = self.max_ack_gap_s
        return limit is None or all(t.longest_ack_gap_s <= limit for t in self.tenants)

    @property
    def ok(self) -> bool:
        lost = any(t.missing or t.corrupt or t.mismatched for t in self.tenants)
        recovered = all(f.recovered_s is not None for f in self.faults)
        return (
            not lost
            and not self.memory_growing
            and all(t.acked for t in self.tenants)
            and self.available
            and recovered
        )

    def table(self) -> str:
        rows = [
            "| tenant | send attempts | acknowledged | received (unique) | missing | corrupt "
            "| duplicates | longest gap between SEND_OKs (s) | send errors |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for t in self.tenants:
            errors = ", ".join(f"{k} {v}" for k, v in sorted(t.send_errors.items())) or "-"
            rows.append(
                f"| {t.namespace} | {t.attempts} | {len(t.acked)} | {len(t.received)} | {len(t.missing)} "
                f"| {t.corrupt + t.mismatched} | {t.duplicates} | {t.longest_ack_gap_s:.1f} | {errors} |"
            )
        rows += [
            "",
            "| t (s) | fault | target | down (s) | all 3 in sync again after (s) |",
            "|---:|---|---|---:|---:|",
        ]
        for f in self.faults:
            rec = "not within 120 s" if f.recovered_s is None else f"{f.recovered_s}"
            rows.append(f"| {f.at_s} | {f.action} | {f.target} | {f.down_s} | {rec} |")
        rows += [
            "",
            "| broker | heap after warm-up (MiB) | heap at end (MiB) | max (MiB) |",
            "|---|---:|---:|---:|",
        ]
        for node, (first, last, peak) in sorted(self.memory.items()):
            rows.append(f"| {node} | {first >> 20} | {last >> 20} | {peak >> 20} |")
        verdict = "PASS" if self.ok else "FAIL"
        rows += [
            "",
            f"**{verdict}**: every acknowledged message received byte for byte: "
            f"{not any(t.missing or t.corrupt or t.mismatched for t in self.tenants)}; "
            f"brokers with growing memory: {', '.join(self.memory_growing) or 'none'}; "
            f"every fault recovered from: {all(f.recovered_s is not None for f in self.faults)}"
            + (
                f"; producers never without a SEND_OK for more than {self.max_ack_gap_s:.0f} s: "
                f"{self.available}."
                if self.max_ack_gap_s is not None
                else "."
            ),
        ]
        return "\n".join(rows)


def provision(state: dict[str, Any], tenants: int, rate: float) -> list[TenantLoad]:
    """Tenants, keys, topics and groups through the REST API; waits until Celery pushed them."""
    from mqcloud import ClientConfig, Credentials

    token = state["operator"]["token"]
    endpoints = ";".join(m["endpoint"] for ms in state["broker_groups"].values() for m in ms)
    loads = []
    with httpx.Client(base_url=state["api"], headers={"Authorization": f"Token {token}"}, timeout=30) as http:
        for i in range(tenants):
            ns = f"soak{i}"
            tenant = http.post("/api/v1/tenants/", json={"name": f"Soak {i}", "namespace": ns})
            tenant.raise_for_status()
            tid = tenant.json()["id"]
            created = [
                http.post("/api/v1/access-keys/", json={"tenant": tid, "description": "soak"}),
                http.post("/api/v1/topics/", json={"tenant": tid, "name": "events", "queue_count": 2}),
                http.post("/api/v1/consumer-groups/", json={"tenant": tid, "name": "readers"}),
            ]
            for response in created:
                response.raise_for_status()
            key = created[0].json()
            paths = ["access-keys", "topics", "consumer-groups"]
            for path, response in zip(paths, created, strict=True):
                deadline = time.monotonic() + 120
                while http.get(f"/api/v1/{path}/{response.json()['id']}/").json()["status"] != "active":
                    if time.monotonic() > deadline:
                        raise SystemExit(f"soak: {path} of {ns} never became active")
                    time.sleep(0.5)
            config = ClientConfig(
                endpoints, credentials=Credentials(key["access_key"], key["secret_key"]), namespace=ns
            )
            loads.append(TenantLoad(ns, config, "events", "readers", rate))
    return loads


def run_soak(
    root: Path,
    duration_s: float,
    fault_interval_s: float,
    tenants: int,
    rate: float,
    seed: int,
    rolling_restart: bool = False,
) -> SoakResult:
    topology = Topology(
        groups=("broker-a",),
        nodes_per_group=3,
        controllers=2,
        min_in_sync_replicas=2,
        web_workers=1,
        celery_concurrency=1,
        segment_bytes=1 << 20,
        # Sealed segments go to S3 within seconds and leave the local disk, so the drain reads
        # part of the run back from the object store.
        broker_settings={
            "tier_offload_after_ms": 0,
            "tier_hot_retention_hours": 0,
            "tier_interval_ms": 2000,
        },
    )
    state = cluster_up(root, topology)
    procs = Processes(root)
    try:
        if wait_healthy(state, 3, 120) is None:
            raise SystemExit("soak: the broker group never had three nodes in sync")
        loads = provision(state, tenants, rate)
        t0 = time.monotonic()
        for load in loads:
            load.start()
        injector: FaultInjector | RollingRestart = (
            RollingRestart(procs, state, fault_interval_s, t0)
            if rolling_restart
            else FaultInjector(procs, state, fault_interval_s, seed, t0)
        )
        injector.start()
        memory: dict[str, list[tuple[float, int, int]]] = {}  # node -> (t, pid, rss)
        while time.monotonic() - t0 < duration_s:
            time.sleep(5)
            for node in procs.brokers():
                pid = procs.pid(node)
                rss = rss_bytes(pid)
                if rss is not None:
                    memory.setdefault(node, []).append((time.monotonic(), pid, rss))
        injector.stop()
        for load in loads:
            load.stop_producing()
        wait_healthy(state, 2, 120)
        # Drain: everything acknowledged must arrive (redeliveries of unacked messages included).
        deadline = time.monotonic() + max(180.0, duration_s / 4)
        while any(load.missing for load in loads) and time.monotonic() < deadline:
            time.sleep(2)
        time.sleep(3)
        for load in loads:
            load.stop_consuming()
        summary, growing = _memory_summary(memory)
        gap = UPGRADE_MAX_ACK_GAP_S if rolling_restart else None
        return SoakResult(time.monotonic() - t0, loads, injector.faults, summary, growing, gap)
    finally:
        cluster_down(root, keep=os.environ.get("MQ_SOAK_KEEP") == "1")


def _memory_summary(
    samples: dict[str, list[tuple[float, int, int]]],
) -> tuple[dict[str, tuple[int, int, int]], list[str]]:
    """Per node (samples are (time, pid, bytes)): heap after warm-up and at the end of its longest
    incarnation, and the peak over the run; and the nodes with an incarnation, old enough to judge,
    whose heap more than doubled (plus slack) after its warm-up."""
    summary: dict[str, tuple[int, int, int]] = {}
    growing = []
    for node, points in samples.items():
        lives: dict[int, list[tuple[float, int, int]]] = {}
        for point in points:
            lives.setdefault(point[1], []).append(point)
        longest: tuple[float, int, int] | None = None  # (judged span, after warm-up, end)
        for life in lives.values():
            warm = [p for p in life if p[0] - life[0][0] >= WARMUP_S]
            if not warm:
                continue
            span, first, last = life[-1][0] - warm[0][0], warm[0][2], life[-1][2]
            if longest is None or span > longest[0]:
                longest = (span, first, last)
            if span >= MEMORY_JUDGE_MIN_S and last > 2 * first + MEMORY_SLACK_BYTES:
                growing.append(node)
                break
        peak = max(p[2] for p in points)
        first, last = (longest[1], longest[2]) if longest else (points[0][2], points[-1][2])
        summary[node] = (first, last, peak)
    return summary, growing


def write_report(path: Path, result: SoakResult, command: str) -> None:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = f"""# Reliability: soak results

Written by `scripts/soak.py` (`make soak`); the last run replaces this page.

- Command: `{command}`
- When: {when}; machine: {os.cpu_count()} cores, `{os.uname().sysname} {os.uname().release}`
- Topology: one broker group of 3 nodes (minInSyncReplicas=2, tiered storage to a moto S3 server,
  1 MiB segments offloaded at once), 2 controllers, control plane (gunicorn) and Celery on
  PostgreSQL and Redis; {len(result.tenants)} tenants, each with a signed producer and a SimpleConsumer.
- Duration of the load: {result.duration_s:.0f} s; faults: {len(result.faults)}.

{result.table()}
"""
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration", default="30m", help="how long the load runs: 90s, 3m, 1h (30m)")
    parser.add_argument("--fault-interval", default="2m", help="seconds between faults (2m)")
    parser.add_argument("--tenants", type=int, default=3)
    parser.add_argument("--rate", type=float, default=40.0, help="messages per second per tenant")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--state-dir", type=Path, default=REPO / ".soak")
    parser.add_argument("--report", type=Path, help="write the summary page here (docs/reliability.md)")
    parser.add_argument(
        "--rolling-restart",
        action="store_true",
        help="instead of faults: upgrade the broker group node by node (SIGTERM, restart, rejoin) "
        "after --fault-interval, and check producers stayed available",
    )
    args = parser.parse_args(argv)
    duration, interval = parse_duration(args.duration), parse_duration(args.fault_interval)
    print(f"soak: {duration:.0f}s of load, a fault every {interval:.0f}s, seed {args.seed}", flush=True)
    result = run_soak(
        args.state_dir, duration, interval, args.tenants, args.rate, args.seed, args.rolling_restart
    )
    print(result.table(), flush=True)
    if args.report is not None:
        command = "python scripts/soak.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_report(args.report, result, command)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
