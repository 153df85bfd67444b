"""The POP state's in-flight tables stay out of the garbage collector's walks.

A full collection walks every tracked container and every value in it while the event loop waits.
The in-flight tables of a queue (the entries by offset and the two heaps over them) hold only ints
and tuples of ints and strings, so ``dataplane._v2_codec.untrack`` takes them out of the collector's
sight. These tests fail when an in-flight table is tracked again after any change the broker makes:
deliveries, extensions, acks, the heaps' rebuilds, a restart from the snapshot and journal, and the
export a compaction writes. One full collection with 400,000 messages in flight went from 11-17 ms
to 0.003 ms (docs/benchmarks.md).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from dataplane import pop
from dataplane.pop import PopState, QueuePosition

TOPIC, GROUP = "t", "g"


def _compiled() -> Any:
    try:
        from dataplane import _v2_codec  # type: ignore[attr-defined]
    except ImportError:  # the broker is built with it: say how, do not skip
        pytest.fail("dataplane/_v2_codec.c is not built: run scripts/build_ext.py")
    return _v2_codec


def _tracked(pos: QueuePosition) -> list[str]:
    """The names of ``pos``'s in-flight tables (and entries) the collector still walks."""
    found = [name for name in ("in_flight", "low", "due_heap") if gc.is_tracked(getattr(pos, name))]
    if any(gc.is_tracked(entry) for entry in pos.in_flight.values()):
        found.append("an entry")
    return found


@pytest.fixture(autouse=True)
def _no_collections() -> Any:
    """The collector untracks atomic tuples itself when it runs: kept from running, it cannot
    hide an entry that went in tracked."""
    gc.disable()
    yield
    gc.enable()


def _state(where: Path, compact_after: int = 1_000_000) -> PopState:
    return PopState(
        where, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None, compact_after=compact_after
    )


def test_untrack_takes_only_containers_of_atomic_values() -> None:
    untrack = _compiled().untrack
    five = int("5")
    pairs = [(five, 1), (five + 2, 2)]
    assert gc.is_tracked(pairs[0])
    assert untrack(pairs) is True
    assert not gc.is_tracked(pairs) and not any(gc.is_tracked(p) for p in pairs)
    entry = (1, "nonce", 2, 3, False)
    assert untrack(entry) is True and not gc.is_tracked(entry)
    # a container that could be part of a cycle stays tracked, and so does everything in it
    one = int("1")  # tuples built at run time are tracked (constants are not)
    holding_a_list = [(one, 2), [3]]
    assert gc.is_tracked(holding_a_list[0])
    assert untrack(holding_a_list) is False
    assert gc.is_tracked(holding_a_list) and gc.is_tracked(holding_a_list[0])
    nested = ((one, 2), (3, [4]))
    assert untrack(nested) is False and gc.is_tracked(nested)
    with pytest.raises(TypeError, match="list or a tuple"):
        untrack({1: 2})


def test_untrack_takes_tuples_the_collector_already_left_without_looking_inside() -> None:
    """An untracked tuple holds nothing the collector tracks (CPython untracks one only then, and
    untrack only tuples of atomic values): such tuples count as atomic as they are, nested ones
    included, so the export of a large POP state is not a read of every value of every entry."""
    untrack = _compiled().untrack
    one = int("1")
    entries = [(one, (one, "n")) for _ in range(3)]  # a tuple inside: not atomic when tracked
    assert all(gc.is_tracked(e) for e in entries)
    assert untrack(list(entries)) is False  # tracked, with a container inside: left to the collector
    gc.collect()  # the collector finds them all atomic and leaves them: the inner tuples first,
    gc.collect()  # then (they untracked) the outer ones
    assert not any(gc.is_tracked(e) for e in entries)
    export = list(entries)
    assert gc.is_tracked(export)
    assert untrack(export) is True and not gc.is_tracked(export)


def test_pop_uses_the_compiled_untrack() -> None:
    assert pop.untrack is _compiled().untrack


def test_in_flight_tables_stay_untracked_through_deliveries_acks_and_rebuilds(tmp_path: Path) -> None:
    state = _state(tmp_path)
    offsets = list(range(6000))
    state.deliver_new(GROUP, TOPIC, 0, offsets[:3000], until_ms=10_000)
    first = state.peek(GROUP, TOPIC, 0)
    assert first is not None and _tracked(first) == []
    for offset in offsets[3000:]:  # one by one, as a redelivery or a FIFO delivery does
        state.deliver(GROUP, TOPIC, 0, offset, 1, 10_000 + offset, offset + 1)
    pos = state.peek(GROUP, TOPIC, 0)
    assert pos is not None and len(pos.in_flight) == 6000
    assert _tracked(pos) == []
    entry = pos.in_flight[10]
    state.extend(GROUP, TOPIC, 0, entry, until_ms=99_999)  # ChangeInvisibleDuration
    assert pos.in_flight[10][pop.UNTIL] == 99_999
    # acks beyond the heaps' slack rebuild both heaps (drop) and the low heap (committed)
    state.ack_many(GROUP, TOPIC, 0, offsets[1:5900])
    assert len(pos.in_flight) == 101 and len(pos.low) < 5000 and len(pos.due_heap) < 5000
    assert _tracked(pos) == []
    assert pos.due(10_000)[0][pop.OFFSET] == 0  # the heaps still answer
    assert pos.committed() == 0
    pos.low.clear()  # no longer a superset of what is in flight: committed() rebuilds it
    assert pos.committed() == 0 and len(pos.low) == 101
    assert _tracked(pos) == []
    state.ack(GROUP, TOPIC, 0, 0)
    assert pos.committed() == 5900
    state.close()


def test_a_restart_and_a_compaction_keep_them_untracked(tmp_path: Path) -> None:
    state = _state(tmp_path, compact_after=500)
    for queue in range(3):
        state.deliver_new(GROUP, TOPIC, queue, list(range(400)), until_ms=50_000)
    exported = state.export()
    assert all(not gc.is_tracked(item["inflight"]) for item in exported if "inflight" in item)
    state.compact()
    state.deliver_new(GROUP, TOPIC, 0, [400, 401], until_ms=60_000)  # the journal after the snapshot
    state.close()
    reopened = _state(tmp_path)  # snapshot and journal read back
    for queue in range(3):
        pos = reopened.peek(GROUP, TOPIC, queue)
        assert pos is not None and len(pos.in_flight) == (402 if queue == 0 else 400)
        assert _tracked(pos) == []
    reopened.close()
