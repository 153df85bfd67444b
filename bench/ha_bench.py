"""HA benchmark: failover time, acknowledged-message loss, minInSync=2 throughput, replication lag.

Real processes on loopback (one controller, a 3-node group; a standalone broker for the baseline),
driven by the chaos-test harness. Figures:

- ``failover_median_s``: master SIGKILLed under continuous produce -> first SEND_OK on the new master.
- ``lost_acked``: messages that got SEND_OK over all the kills and were not consumed afterwards.
- ``insync2_vs_single_ratio``: produce msgs/s with minInSyncReplicas=2 in a 3-node group over a
  standalone broker's, same client load (``--threads`` blocking senders, 1 KiB bodies).
- ``replication_lag_p99_ms``: p99 of DATA sent -> REPORT received per replica (the master's samples),
  worst replica, under the steady load of the minInSync=2 run.

Usage: ``uv run python bench/ha_bench.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.chaos.load import Producer, create_topic, drain  # noqa: E402
from tests.integration.broker.conftest import V2  # noqa: E402
from tests.integration.ha.cluster import HABroker, HACluster  # noqa: E402

BODY = os.urandom(512).hex().encode()  # 1 KiB


def _throughput(target: str, topic: str, threads: int, seconds: float) -> float:
    done = [0] * threads
    stop = threading.Event()

    def run(i: int) -> None:
        client = V2(target)
        while not stop.is_set():
            if client.send(topic, BODY).status.code == 20000:
                done[i] += 1
        client.close()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    time.sleep(1.0)  # warm-up
    start, before = time.monotonic(), sum(done)
    time.sleep(seconds)
    rate = (sum(done) - before) / (time.monotonic() - start)
    stop.set()
    for w in workers:
        w.join(30)
    return rate


def single_node_rate(root: Path, threads: int, seconds: float) -> float:
    node = HABroker(root / "single", "single", "single", "")
    node.start()
    try:
        from mqcloud.admin_client import BrokerAdminClient

        with BrokerAdminClient(node.target) as admin:
            admin.create_topic("bench", queue_count=4)
        return _throughput(node.target, "bench", threads, seconds)
    finally:
        node.kill()


def ha_figures(root: Path, rounds: int, threads: int, seconds: float) -> dict[str, Any]:
    cluster = HACluster(root / "group", size=3, env={"MQ_BROKER_MIN_IN_SYNC_REPLICAS": "2"})
    cluster.start()
    try:
        master = cluster.wait_in_sync(3)
        create_topic(cluster, "bench", "bench-g")
        create_topic(cluster, "tput", "tput-g")  # throughput phase: same body every time
        rate = _throughput(master.target, "tput", threads, seconds)
        lag = max(r.lag_p99_ms for r in master.status().node.replicas)
        producer = Producer(cluster, "bench")
        producer.start()
        failovers = []
        try:
            for _ in range(rounds):
                master = cluster.wait_in_sync(3)
                time.sleep(0.5)
                killed = time.monotonic()
                master.signal(signal.SIGKILL)
                master.proc.wait(10)  # type: ignore[union-attr]
                new = cluster.wait_master(exclude=master.node)
                first = None
                while first is None and time.monotonic() - killed < 20:
                    first = producer.first_ack_after(killed, new.node)
                    time.sleep(0.02)
                assert first is not None, "no SEND_OK after a failover"
                failovers.append(first - killed)
                master.start()
        finally:
            producer.stop()
        final = cluster.wait_in_sync(3)
        drained = drain(final.target, "bench", "bench-g")
        lost = sum(1 for body in producer.acked if body not in drained.bodies)
        return {
            "insync2_msgs_per_s": round(rate, 1),
            "replication_lag_p99_ms": round(lag, 2),
            "failover_s": [round(f, 2) for f in failovers],
            "failover_median_s": round(statistics.median(failovers), 2),
            "acked": len(producer.acked),
            "lost_acked": lost,
            "duplicates": sum(drained.bodies.get(body, 1) - 1 for body in producer.acked),
        }
    finally:
        cluster.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 failovers, 5 s throughput windows")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    rounds, seconds = (3, 5.0) if args.quick else (7, 15.0)
    with tempfile.TemporaryDirectory(prefix="ha-bench-") as tmp:
        root = Path(tmp)
        single = single_node_rate(root, args.threads, seconds)
        figures = ha_figures(root, rounds, args.threads, seconds)
    figures["single_msgs_per_s"] = round(single, 1)
    figures["insync2_vs_single_ratio"] = round(figures["insync2_msgs_per_s"] / single, 3)
    figures["machine"] = f"{platform.machine()} nproc={os.cpu_count()} python={platform.python_version()}"
    figures["quick"] = args.quick
    text = json.dumps(figures, indent=1)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0 if figures["lost_acked"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
