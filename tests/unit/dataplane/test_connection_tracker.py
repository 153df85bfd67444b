"""ConnectionTracker.counts read from the metrics thread while the event loop admits clients."""

from __future__ import annotations

import pytest

from dataplane.quota import ConnectionTracker, TooManyRequests
from tests.conftest import ManualClock, reader_racing

ROUNDS = 20_000


def test_counts_expire_silent_clients_without_forgetting_them() -> None:
    clock = ManualClock()
    tracker = ConnectionTracker(expire_s=120, clock=clock)
    tracker.admit("a", "c1", None)
    clock.now += 100
    tracker.admit("a", "c2", None)
    tracker.admit("b", "c3", None)
    assert tracker.counts() == {"a": 2, "b": 1}
    clock.now += 30  # c1 silent for 130 s, the others 30 s
    assert tracker.counts() == {"a": 1, "b": 1}
    clock.now += 200
    assert tracker.counts() == {}
    tracker.admit("a", "c1", None)  # seen again: counted again
    assert tracker.counts() == {"a": 1}


def test_a_reader_on_another_thread_never_fails_while_clients_arrive() -> None:
    clock = ManualClock()
    tracker = ConnectionTracker(expire_s=120, clock=clock)

    # when: clients of new namespaces arrive while another thread reads the counts
    with reader_racing(tracker.counts) as race:
        for i in range(ROUNDS):
            tracker.admit(f"ns{i % 500}", f"client-{i}", None)
            if i % 1000 == 0:
                clock.now += 1

    # then: no reading failed, and none of the admitted clients was lost
    assert race.errors == []
    assert race.readings > 0
    assert sum(tracker.counts().values()) == ROUNDS


def test_expire_forgets_silent_clients_and_empty_namespaces() -> None:
    clock = ManualClock()
    tracker = ConnectionTracker(expire_s=120, clock=clock)
    tracker.admit("a", "c1", None)
    tracker.admit("b", "c2", None)
    clock.now += 100
    tracker.admit("a", "c3", None)
    clock.now += 30
    tracker.expire()
    assert {ns: set(clients) for ns, clients in tracker._clients.items()} == {"a": {"c3"}}
    # a limit of 1 now admits a new client of "b" (its silent one is gone) and refuses a second of "a"
    tracker.admit("b", "c4", 1)
    with pytest.raises(TooManyRequests, match="max_connections 1"):
        tracker.admit("a", "c5", 1)
