"""POP journal compaction: the snapshot is written off the caller's thread, and a restart at any point
of a compaction finds the state it left (module docstring of dataplane/pop.py)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

import dataplane.pop as pop_module
from dataplane.pop import PopState


def _state(where: Path, compact_after: int = 100_000) -> PopState:
    return PopState(
        where,
        initial_offset=lambda g, t, q: 0,
        on_commit=lambda g, t, q, o: None,
        compact_after=compact_after,
    )


def _work(state: PopState, rounds: int, start: int = 0) -> None:
    """Deliveries of 8 messages per queue, the first half of them acked: the state keeps growing."""
    for r in range(start, start + rounds):
        for q in range(4):
            offsets = list(range(r * 8, r * 8 + 8))
            with state.batch():
                state.deliver_new("g", "t", q, offsets, 10**13)
            with state.batch():
                state.ack_many("g", "t", q, offsets[:4])


def _view(state: PopState) -> list[Any]:
    """The state, order aside."""
    return sorted(json.dumps(item, sort_keys=True) for item in state.export())


def _reopens_the_same(state: PopState, where: Path) -> None:
    """A crash now (no close(), no last compaction): the state reopened from disk is the live one."""
    state.wait_compacted()
    live = _view(state)
    state._journal.flush()
    assert _view(_state(where)) == live


def _files(where: Path) -> list[str]:
    return sorted(p.name for p in (where / "pop").iterdir())


def test_compactions_under_way_leave_a_state_that_reloads_the_same(tmp_path: Path) -> None:
    state = _state(tmp_path, compact_after=100)  # a compaction every few calls
    _work(state, 40)
    state.wait_compacted()
    # the journals the snapshots covered were deleted: only the current one is left
    assert _files(tmp_path) == ["journal.log", "snapshot.json"]
    live = _view(state)
    state._journal.flush()  # a crash now: no close(), no last compaction
    reloaded = _state(tmp_path)
    assert _view(reloaded) == live


def test_the_caller_does_not_wait_for_the_snapshot_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = threading.get_ident()
    fsync = os.fsync

    def slow_off_the_caller(fd: int) -> None:
        if threading.get_ident() != caller:
            time.sleep(0.5)
        fsync(fd)

    monkeypatch.setattr(pop_module.os, "fsync", slow_off_the_caller)
    state = _state(tmp_path, compact_after=50)
    started = time.monotonic()
    _work(state, 2)  # 64 journal records: one compaction
    assert time.monotonic() - started < 0.3  # the snapshot's fsync ran in its own thread
    assert not (tmp_path / "pop" / "snapshot.json").exists()
    state.wait_compacted()
    assert (tmp_path / "pop" / "snapshot.json").exists()
    assert _view(_state(tmp_path)) == _view(state)


def test_a_crash_before_the_snapshot_is_renamed_replays_the_rotated_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _state(tmp_path, compact_after=200)
    _work(state, 10)
    state.wait_compacted()  # one snapshot on disk
    monkeypatch.setattr(PopState, "_write_snapshot", lambda self, *args: None)  # cut short
    _work(state, 10, start=10)
    state.wait_compacted()
    _work(state, 3, start=20)
    state._journal.flush()
    # rotated (how many times depends on how soon each snapshot thread ended), and none covered
    assert any(name.startswith("journal.") and name != "journal.log" for name in _files(tmp_path))
    assert _view(_state(tmp_path)) == _view(state)


def test_a_crash_after_the_rename_skips_the_journal_the_snapshot_covers(tmp_path: Path) -> None:
    state = _state(tmp_path, compact_after=200)
    _work(state, 10)
    state.wait_compacted()
    state._journal.flush()
    live = _view(state)
    snapshot = json.loads((tmp_path / "pop" / "snapshot.json").read_text())
    covered = max(item["journal"] for item in snapshot if "cl" in item) - 1
    # the rotated journal the snapshot covers, as if its deletion had not happened: a line in it that
    # would change the state if it were replayed
    stray = tmp_path / "pop" / f"journal.{covered}.log"
    stray.write_text('{"op":"pop","g":"g","t":"t","q":7,"o":999,"n":"00","a":1,"u":1,"next":1000}\n')
    reloaded = _state(tmp_path)
    assert _view(reloaded) == live
    assert not stray.exists()
    # and a rotation after that restart does not reuse a number a snapshot already covers
    reloaded.compact()
    assert max(
        i["journal"] for i in json.loads((tmp_path / "pop" / "snapshot.json").read_text()) if "cl" in i
    ) > (covered + 1)


def test_names_beyond_ascii_survive_a_compaction(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.deliver_new("ns%gröup", "ns%tópico", 0, [0, 1], 10**13)
    state.close()  # compacts: the snapshot is UTF-8 (orjson), the journal empty
    reloaded = _state(tmp_path)
    assert list(reloaded.position("ns%gröup", "ns%tópico", 0).in_flight) == [0, 1]


def test_a_state_written_before_rotated_journals_still_loads(tmp_path: Path) -> None:
    where = tmp_path / "pop"
    where.mkdir()
    # the layout of earlier brokers: a snapshot with no "journal" in its cl item, and journal.log
    (where / "snapshot.json").write_text(
        json.dumps([{"g": "g", "t": "t", "q": 0, "next": 3, "inflight": [[2, "ab", 1, 10**13]]}, {"cl": 0}])
    )
    (where / "journal.log").write_text(
        '{"op":"pop","g":"g","t":"t","q":0,"o":3,"n":"cd","a":1,"u":10000000000000,"next":4}\n'
        '{"op":"ack","g":"g","t":"t","q":0,"o":2}\n'
    )
    state = _state(tmp_path)
    pos = state.position("g", "t", 0)
    assert pos.next_offset == 4 and list(pos.in_flight) == [3]
    state.close()
    assert _view(_state(tmp_path)) == _view(state)


def test_the_snapshot_is_serialized_in_runs_to_the_same_bytes(tmp_path: Path) -> None:
    """The snapshot thread serializes a few thousand entries at a time (the loop runs in between):
    the bytes are orjson's of each item, a large queue's, a FIFO queue's and an empty one's, and the
    snapshot holds the export."""
    state = PopState(tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None)
    state.deliver_new("g", "t", 0, list(range(10_000)), 10**13)
    state.deliver("g", "t", 0, 5, 2, 10**13, 10_000, waiting=True)
    state.deliver("g", "t", 1, 0, 1, 10**13, 1, message_group="mg")
    state.hold("g", "t", 1, 1, "mg", 2)
    state.advance("g", "t", 2, 7)
    items = state.export()
    assert len(items[0]["inflight"]) > pop_module._SERIALIZED_RUN
    assert [pop_module.serialized_item(item) for item in items] == [orjson.dumps(item) for item in items]
    state.compact()
    on_disk = orjson.loads((tmp_path / "pop" / "snapshot.json").read_bytes())
    assert on_disk[:-1] == orjson.loads(orjson.dumps(items[:-1]))
    state.close()
    again = PopState(tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None)
    assert orjson.loads(orjson.dumps(again.export()[:-1])) == orjson.loads(orjson.dumps(items[:-1]))
    again.close()


def test_a_large_state_is_compacted_after_as_many_records_as_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot writes every entry in flight: with many more of them than ``compact_after``, the next
    compaction waits for as many journal records as the last snapshot held (or the snapshots would
    cost more per record the more is in flight, and pause the broker every few seconds)."""
    compactions: list[int] = []
    original = PopState.compact_in_background

    def counted(self: PopState) -> None:
        compactions.append(self.in_flight_count())
        original(self)

    monkeypatch.setattr(PopState, "compact_in_background", counted)
    state = _state(tmp_path, compact_after=100)
    with state.batch():
        state.deliver_new("g", "t", 0, list(range(1000)), 10**13)  # 1,000 records: past 100
    assert compactions == [1000]  # the snapshot holds 1,000 entries
    state.wait_compacted()  # (one under way holds the next back)
    for offset in range(999):  # 999 more records: fewer than the snapshot's 1,000
        state.ack("g", "t", 0, offset)
    assert compactions == [1000]
    state.ack("g", "t", 0, 999)  # the 1,000th
    assert compactions == [1000, 0]
    state.wait_compacted()
    # the state left is small again: compact_after is the bound once more
    with state.batch():
        state.deliver_new("g", "t", 0, list(range(1000, 1100)), 10**13)
    assert compactions == [1000, 0, 100]
    _reopens_the_same(state, tmp_path)


def test_a_compaction_serializes_again_only_the_positions_changed_since_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Positions nobody touched since the last snapshot are written as they were then: a group
    holding many messages in flight and doing nothing costs a compaction no serialization."""
    state = _state(tmp_path)
    with state.batch():
        for q in range(4):
            state.deliver_new("idle", "t", q, list(range(500)), 10**13)
    state.deliver_new("busy", "t", 0, [0, 1], 10**13)
    state.compact()
    serialized_now: list[tuple[str, int]] = []
    original = pop_module.serialized_item

    def counted(item: dict[str, Any]) -> bytes:
        serialized_now.append((item["g"], item["q"]))
        return original(item)

    monkeypatch.setattr(pop_module, "serialized_item", counted)
    state.ack("busy", "t", 0, 0)
    state.compact()
    assert serialized_now == [("busy", 0)]
    serialized_now.clear()
    state.compact()  # nothing changed: nothing serialized
    assert serialized_now == []
    state.advance("idle", "t", 2, 600)
    state.compact_in_background()
    state.wait_compacted()
    assert serialized_now == [("idle", 2)]
    _reopens_the_same(state, tmp_path)


def test_positions_kept_as_written_reload_the_same_through_random_changes_and_failed_snapshots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every kind of change to a few positions, most of them idle for stretches (so their parts are
    reused), compactions every few calls in the background, some snapshot threads dying before
    they serialize: a state reopened from disk at any point is the live one."""
    import random

    rng = random.Random(5)
    state = _state(tmp_path, compact_after=60)
    hot = [("a", "t", 0), ("fifo", "t", 0)]
    cold = [(g, "t", q) for g in ("a", "b", "fifo") for q in range(1, 5)]  # changed now and then
    cursor = dict.fromkeys(hot + cold, 0)
    original = PopState._write_snapshot

    def sometimes_dies(self: PopState, *args: Any) -> None:
        if rng.random() < 0.2:
            return  # the thread ended before it serialized anything (killed, an error)
        original(self, *args)

    monkeypatch.setattr(PopState, "_write_snapshot", sometimes_dies)
    for step in range(3000):
        g, t, q = key = rng.choice(hot if rng.random() < 0.85 else cold)
        pos = state.position(g, t, q)
        op = rng.random()
        with state.batch():
            if op < 0.3:
                offsets = list(range(cursor[key], cursor[key] + rng.randrange(1, 5)))
                cursor[key] += len(offsets)
                if g == "fifo":
                    for o in offsets:
                        state.deliver(g, t, q, o, 1, 10**13, o + 1, message_group=f"mg{o % 3}")
                else:
                    state.deliver_new(g, t, q, offsets, 10**13 + step)
            elif op < 0.4 and pos.in_flight:
                entry = pos.in_flight[rng.choice(list(pos.in_flight))]
                state.extend(g, t, q, entry, 10**13 + step)
            elif op < 0.55 and pos.in_flight:
                offset = rng.choice(list(pos.in_flight))
                state.deliver(g, t, q, offset, 2, 10**13 + step, cursor[key])
            elif op < 0.8 and pos.in_flight:
                chosen = rng.sample(list(pos.in_flight), min(len(pos.in_flight), rng.randrange(1, 4)))
                state.ack_many(g, t, q, chosen)
            elif op < 0.85 and g == "fifo":
                state.hold(g, t, q, cursor[key], f"mg{cursor[key] % 3}", cursor[key] + 1)
                cursor[key] += 1
            elif op < 0.9:
                cursor[key] += rng.randrange(1, 4)
                state.advance(g, t, q, cursor[key])
            elif op < 0.93:
                state.reset(g, t, q, cursor[key])
            elif op < 0.95:
                state.forget([key])
        if step % 97 == 0:
            _reopens_the_same(state, tmp_path)
    monkeypatch.setattr(PopState, "_write_snapshot", original)
    state.wait_compacted()
    live = _view(state)
    state.close()
    assert _view(_state(tmp_path)) == live
