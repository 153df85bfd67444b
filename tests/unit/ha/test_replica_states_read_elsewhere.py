"""HAService's replica views, read by the metrics endpoint's thread while the loop adds and drops replicas."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from dataplane.ha.service import HAService, ReplicaState

ROUNDS = 20_000


def test_in_sync_views_never_fail_while_replicas_come_and_go() -> None:
    service = HAService(store=None, epochs=None, group="g", key=b"k")  # type: ignore[arg-type]
    service.controller_sss = {f"r{i}" for i in range(0, 64, 2)}
    errors: list[BaseException] = []
    readings: list[tuple[list[str], list[Any]]] = []
    done = threading.Event()

    def read() -> None:  # the prometheus endpoint's thread (dataplane.metrics.HACollector)
        try:
            while not done.is_set():
                readings.append((service.local_in_sync(), service.counted_replicas()))
        except BaseException as exc:  # reported below
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(ROUNDS):  # replicas connect, catch up and disconnect, as on the loop
            node = f"r{i % 64}"
            if node in service.replicas:
                del service.replicas[node]
            else:
                state = service.replicas[node] = ReplicaState(node, "127.0.0.1:1")
                state.last_caught_up = time.monotonic()
    finally:
        done.set()
        reader.join()
        sys.setswitchinterval(interval)

    assert errors == []
    assert readings
    # what the views say at the end: every connected replica caught up just now is in sync, and the
    # counted ones are those the controller's SyncStateSet holds too
    assert service.local_in_sync() == sorted(service.replicas)
    assert {r.node for r in service.counted_replicas()} == set(service.replicas) & service.controller_sss
