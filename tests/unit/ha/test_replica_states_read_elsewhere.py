"""HAService's replica views, read by the metrics endpoint's thread while the loop adds and drops replicas."""

from __future__ import annotations

import time

from dataplane.ha.service import HAService, ReplicaState
from tests.conftest import reader_racing

ROUNDS = 20_000


def test_in_sync_views_never_fail_while_replicas_come_and_go() -> None:
    service = HAService(store=None, epochs=None, group="g", key=b"k")  # type: ignore[arg-type]
    service.controller_sss = {f"r{i}" for i in range(0, 64, 2)}

    def read() -> None:  # the prometheus endpoint's thread (dataplane.metrics.HACollector)
        service.local_in_sync()
        service.counted_replicas()

    with reader_racing(read) as race:
        for i in range(ROUNDS):  # replicas connect, catch up and disconnect, as on the loop
            node = f"r{i % 64}"
            if node in service.replicas:
                del service.replicas[node]
            else:
                state = service.replicas[node] = ReplicaState(node, "127.0.0.1:1")
                state.last_caught_up = time.monotonic()

    assert race.errors == []
    assert race.readings > 0
    # what the views say at the end: every connected replica caught up just now is in sync, and the
    # counted ones are those the controller's SyncStateSet holds too
    assert service.local_in_sync() == sorted(service.replicas)
    assert {r.node for r in service.counted_replicas()} == set(service.replicas) & service.controller_sss
