"""PopState's due messages and next due time, kept in a heap, against a full scan of what is in flight."""

from __future__ import annotations

import random
import time
from pathlib import Path

from dataplane.pop import ATTEMPT, OFFSET, UNTIL, InFlight, PopState, QueuePosition


def _brute_due(pos: QueuePosition, now_ms: int) -> list[InFlight]:
    return sorted((e for e in pos.in_flight.values() if e[UNTIL] <= now_ms), key=lambda e: e[OFFSET])


def _brute_next(state: PopState, group: str, topic: str, queues: int) -> int | None:
    times = [
        e[UNTIL]
        for q in range(queues)
        if (pos := state.peek(group, topic, q)) is not None
        for e in pos.in_flight.values()
    ]
    return min(times, default=None)


def test_due_and_next_due_match_a_full_scan_through_random_changes_and_reopens(tmp_path: Path) -> None:
    rng = random.Random(11)
    queues = 3

    def open_state() -> PopState:
        return PopState(
            tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None, compact_after=700
        )

    state = open_state()
    cursors = {(g, q): 0 for g in ("g1", "g2") for q in range(queues)}
    now = 1_000_000
    for step in range(5000):
        now += rng.randrange(0, 40)
        group, qid = rng.choice(list(cursors))
        pos = state.position(group, "t", qid)
        op = rng.random()
        if op < 0.35:  # a first delivery, invisible for a while
            offsets = list(range(cursors[(group, qid)], cursors[(group, qid)] + rng.randrange(1, 4)))
            state.deliver_new(group, "t", qid, offsets, now + rng.randrange(0, 500))
            cursors[(group, qid)] = offsets[-1] + 1
        elif op < 0.55 and pos.in_flight:  # a redelivery, renewal or nack (earlier or later time)
            offset = rng.choice(list(pos.in_flight))
            entry = pos.in_flight[offset]
            state.deliver(group, "t", qid, offset, entry[ATTEMPT] + 1, now + rng.randrange(-50, 500), 0)
        elif op < 0.9 and pos.in_flight:  # an ack, in any order
            state.ack(group, "t", qid, rng.choice(list(pos.in_flight)))
        elif op < 0.92:  # UpdateOffset drops what is in flight
            state.reset(group, "t", qid, cursors[(group, qid)])
        elif op < 0.94:  # a restart (journal replay and/or snapshot)
            state.close()
            state = open_state()
        for g in ("g1", "g2"):
            for q in range(queues):
                p = state.position(g, "t", q)
                # asked twice: due() leaves what it finds in flight (the receive may stop early)
                assert p.due(now) == _brute_due(p, now), step
                assert p.due(now) == _brute_due(p, now), step
            assert state.next_due_ms(g, "t") == _brute_next(state, g, "t", queues), step
    state.close()


def test_the_heap_stays_near_the_in_flight_count_when_acks_come_before_the_time_runs_out(
    tmp_path: Path,
) -> None:
    state = PopState(tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None)
    for offset in range(100_000):
        state.deliver_new("g", "t", 0, [offset], 10**13)
        state.ack("g", "t", 0, offset)
    pos = state.position("g", "t", 0)
    assert not pos.in_flight
    assert len(pos.due_heap) <= 1024 + 1
    assert state.next_due_ms("g", "t") is None
    state.close()


def test_forgotten_positions_stay_gone_after_a_reopen_and_on_a_replica(tmp_path: Path) -> None:
    shipped: list[str] = []

    def open_state(where: Path) -> PopState:
        return PopState(where, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None)

    state = open_state(tmp_path / "master")
    state.sink = shipped.extend
    for group in ("g", "g@client-1", "h"):
        for qid in range(2):
            state.deliver_new(group, "t", qid, [0, 1], 10**13)
    assert state.forget(k for k in state.position_keys() if k[0].startswith("g@")) == 2
    assert state.forget([("h", "t", 0), ("nobody", "t", 0)]) == 1
    assert state.next_due_ms("g@client-1", "t") is None
    left = {("g", "t", 0), ("g", "t", 1), ("h", "t", 1)}
    assert set(state.position_keys()) == left
    state.close()
    reopened = open_state(tmp_path / "master")
    assert set(reopened.position_keys()) == left
    assert reopened.next_due_ms("h", "t") == 10**13
    reopened.close()
    replica = open_state(tmp_path / "replica")
    replica.apply_replicated("".join(shipped).encode(), cl_next=1)
    assert set(replica.position_keys()) == left
    replica.close()


def test_idle_names_the_pairs_not_touched_for_a_while(tmp_path: Path) -> None:
    state = PopState(tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None)
    for group in ("g@a", "g@b", "plain"):
        state.position(group, "t", 0)
    assert state.idle(lambda g: "@" in g, 0.05) == []  # first look: counted from now
    state.touch("g@b", "t")
    time.sleep(0.06)
    state.touch("g@b", "t")
    assert state.idle(lambda g: "@" in g, 0.05) == [("g@a", "t")]
    state.close()
