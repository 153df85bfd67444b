"""PopState's committed offset (lowest offset not yet acked) without a scan of every in-flight message."""

from __future__ import annotations

import random
import time
from pathlib import Path

from dataplane.pop import ATTEMPT, OFFSET, PopState, QueuePosition


def _brute(pos: QueuePosition) -> int:
    first = min(pos.in_flight, default=pos.next_offset)
    return min(first, min(pos.held)) if pos.held else first


def test_committed_matches_a_full_scan_through_random_deliveries_acks_and_reopens(tmp_path: Path) -> None:
    rng = random.Random(7)
    commits: dict[tuple[str, str, int], int] = {}

    def open_state() -> PopState:
        return PopState(
            tmp_path,
            initial_offset=lambda g, t, q: 0,
            on_commit=lambda g, t, q, o: commits.__setitem__((g, t, q), o),
            compact_after=500,  # snapshots (restore) as well as journal replays
        )

    state = open_state()
    cursor = 0
    for step in range(4000):
        pos = state.position("g", "t", 0)
        op = rng.random()
        if op < 0.45:  # a new message
            state.deliver("g", "t", 0, cursor, 1, 10**13, cursor + 1)
            cursor += 1
        elif op < 0.55 and pos.in_flight:  # a redelivery / renewal of one in flight
            offset = rng.choice(list(pos.in_flight))
            state.deliver("g", "t", 0, offset, 2, 10**13, cursor)
        elif op < 0.97 and pos.in_flight:  # an ack, in any order
            state.ack("g", "t", 0, rng.choice(list(pos.in_flight)))
        elif op < 0.98:  # UpdateOffset
            cursor = rng.randrange(cursor + 5)
            state.reset("g", "t", 0, cursor)
        else:  # a restart (journal replay and/or snapshot)
            state.close()
            state = open_state()
        pos = state.position("g", "t", 0)
        assert pos.committed() == _brute(pos), step
        if ("g", "t", 0) in commits and step % 7 == 0:
            assert commits[("g", "t", 0)] == _brute(pos)
    state.close()


def test_delivery_and_ack_do_not_scan_the_in_flight_table(tmp_path: Path) -> None:
    state = PopState(tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None)

    def per_message(in_flight: int) -> float:
        with state.batch():
            for offset in range(in_flight):
                state.deliver("g", "t", in_flight, offset, 1, 10**13, offset + 1)
        started = time.perf_counter()
        with state.batch():
            for offset in range(in_flight, in_flight + 2000):
                state.deliver("g", "t", in_flight, offset, 1, 10**13, offset + 1)
                state.ack("g", "t", in_flight, offset)
        return (time.perf_counter() - started) / 2000

    small, large = per_message(10), per_message(50_000)
    # a scan of 50,000 offsets costs ~1 ms per call; the heap keeps it near the 10-message cost
    assert large < max(small * 5, 200e-6), (small, large)


def test_batched_deliveries_and_acks_journal_and_commit_as_one_by_one(tmp_path: Path) -> None:
    """deliver_new / ack_many (a receive's new messages, an ack's entries of one queue) leave the same
    state, journal lines and committed offset as deliver / ack called for each, and replay the same
    (ack is ack_many of one offset: the replay is what checks its lines)."""
    import dataplane.pop as pop_module

    def run(where: Path, batched: bool) -> tuple[list[str], dict[tuple[str, str, int], int], PopState]:
        commits: dict[tuple[str, str, int], int] = {}
        pop_module._rng.seed(11)  # the same nonces on both sides
        state = PopState(
            where,
            initial_offset=lambda g, t, q: 3,
            on_commit=lambda g, t, q, o: commits.update({(g, t, q): o}),
        )
        waves = [[3, 4, 5, 9], [10, 11], [20]]  # gaps: messages a filter or another group passed over
        acks = [[4, 3], [9, 11], [5, 20, 10]]  # in any order
        for offsets, acked in zip(waves, acks, strict=True):
            if batched:
                entries = state.deliver_new("g", "ns%t", 1, offsets, 10**13)
            else:
                entries = [state.deliver("g", "ns%t", 1, o, 1, 10**13, o + 1) for o in offsets]
            assert [e[OFFSET] for e in entries] == offsets and all(e[ATTEMPT] == 1 for e in entries)
            if batched:
                state.ack_many("g", "ns%t", 1, acked)
            else:
                for offset in acked:
                    state.ack("g", "ns%t", 1, offset)
        state._journal.flush()
        return (where / "pop" / "journal.log").read_text().splitlines(), commits, state

    one_lines, one_commits, one = run(tmp_path / "one", batched=False)
    many_lines, many_commits, many = run(tmp_path / "many", batched=True)
    assert many_lines == one_lines and len(many_lines) == 14
    assert many_commits == one_commits == {("g", "ns%t", 1): 21}
    assert many.export() == one.export()
    many.close()
    replayed = PopState(tmp_path / "many", initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None)
    assert replayed.export() == one.export()
    replayed.close()
    one.close()


def test_ack_many_frees_held_fifo_messages_as_ack_does(tmp_path: Path) -> None:
    state = PopState(tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None)
    state.deliver("g", "t", 0, 0, 1, 10**13, 1, message_group="a")
    state.hold("g", "t", 0, 1, "a", 2)
    assert state.ack_many("g", "t", 0, [0]) is True  # offset 1 of group "a" may go now
    pos = state.position("g", "t", 0)
    assert 0 not in pos.groups and pos.held == {1} and pos.committed() == 1
    state.close()
