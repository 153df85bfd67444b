"""The compiled per-queue loops after a CommitLog write against their Python forms.

``write_queue_runs`` copies the usual run (it starts at the queue's max offset and fits in the last
file) straight into the ConsumeQueue's mapping and hands every other run to the Python put; both
must leave the same files, offsets and max offsets behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.store.consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueueTable
from dataplane.store.record import QueueRuns, compiled_advance_queue_offsets, compiled_write_queue_runs

ENTRIES_PER_FILE = 16


def _packed(first_physical: int, count: int) -> bytearray:
    return bytearray(b"".join(CQ_ENTRY.pack(first_physical + i * 100, 100, i) for i in range(count)))


def _python_write(table: ConsumeQueueTable, runs: QueueRuns) -> dict[tuple[str, int], int]:
    return {key: table.find_or_create(*key).put(first, entries) for key, (first, entries) in runs.items()}


def _compiled_write(table: ConsumeQueueTable, runs: QueueRuns, calls: list) -> dict[tuple[str, int], int]:
    assert compiled_write_queue_runs is not None, "the C extension is not built: run scripts/build_ext.py"

    def put(key: tuple[str, int], first: int, entries: bytearray) -> int:
        calls.append((key, first))
        return table.find_or_create(*key).put(first, entries)

    return compiled_write_queue_runs(runs, table.queues, put)


def _state(table: ConsumeQueueTable) -> dict:
    out = {}
    for key, cq in sorted(table.queues.items()):
        entries = [cq.entry(o) for o in range(cq.min_offset, cq.max_offset)]
        positions = [mf.wrote_position for mf in cq.queue.files]
        out[key] = (cq.min_offset, cq.max_offset, entries, positions, cq.dirty)
    return out


# Batches of runs in order: the usual appends, a run crossing into a second file, a queue seen for
# the first time midway, and a run re-dispatched over entries already there (recovery).
STEPS: list[QueueRuns] = [
    {("t", 0): (0, _packed(0, 3)), ("t", 1): (0, _packed(50, 2))},
    {("t", 0): (3, _packed(300, 5)), ("t", 1): (2, _packed(500, 4))},
    {("t", 0): (8, _packed(800, 12)), ("u", 7): (0, _packed(900, 1))},
    {("t", 1): (6, _packed(1000, 1)), ("u", 7): (0, _packed(900, 3))},
]


def test_compiled_runs_leave_what_the_python_put_leaves(tmp_path: Path) -> None:
    python_table = ConsumeQueueTable(tmp_path / "python", ENTRIES_PER_FILE)
    compiled_table = ConsumeQueueTable(tmp_path / "compiled", ENTRIES_PER_FILE)
    calls: list = []
    for runs in STEPS:
        expected = _python_write(python_table, runs)
        assert _compiled_write(compiled_table, runs, calls) == expected
        assert _state(compiled_table) == _state(python_table)
    # only the unusual runs took the Python put: first runs of a queue (no ConsumeQueue yet), the run
    # crossing a file end and the overlapping one
    assert calls == [(("t", 0), 0), (("t", 1), 0), (("t", 0), 8), (("u", 7), 0), (("u", 7), 0)]
    assert compiled_table.find("t", 0).max_offset == 20  # type: ignore[union-attr]
    assert len(compiled_table.find("t", 0).queue.files) == 2  # type: ignore[union-attr]
    assert compiled_table.find("t", 1).entry(6) == (1000, 100, 0)  # type: ignore[union-attr]


def test_the_usual_run_is_written_without_the_python_put(tmp_path: Path) -> None:
    table = ConsumeQueueTable(tmp_path, ENTRIES_PER_FILE)
    calls: list = []
    _compiled_write(table, {("t", 0): (0, _packed(0, 1))}, calls)
    cq = table.find("t", 0)
    assert cq is not None
    cq.dirty = False
    calls.clear()
    moved = _compiled_write(table, {("t", 0): (1, _packed(100, 4))}, calls)
    assert calls == []
    assert moved == {("t", 0): 5}
    assert (cq.max_offset, cq.queue.files[-1].wrote_position, cq.dirty) == (5, 5 * CQ_ENTRY_SIZE, True)
    assert [cq.entry(i) for i in range(1, 5)] == [(100 + i * 100, 100, i) for i in range(4)]


def test_advance_queue_offsets_matches_the_python_loop() -> None:
    assert compiled_advance_queue_offsets is not None
    offsets = {("t", 0): 3, ("x", 2): 9}
    compiled_advance_queue_offsets(STEPS[1], offsets)
    assert offsets == {("t", 0): 8, ("t", 1): 6, ("x", 2): 9}


def test_malformed_runs_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    assert compiled_write_queue_runs is not None and compiled_advance_queue_offsets is not None
    table = ConsumeQueueTable(tmp_path, ENTRIES_PER_FILE)
    table.find_or_create("t", 0).put(0, _packed(0, 1))
    with pytest.raises(ValueError, match="multiple of 20 bytes, found 7"):
        compiled_write_queue_runs({("t", 0): (1, b"x" * 7)}, table.queues, _python_put_never)
    with pytest.raises(TypeError, match="first offset, packed entries"):
        compiled_advance_queue_offsets({("t", 0): 1}, {})
    with pytest.raises(TypeError, match="queue_runs: dict"):
        compiled_write_queue_runs([], table.queues, _python_put_never)
    assert table.find("t", 0).max_offset == 1  # type: ignore[union-attr]


def test_a_closed_queue_raises_instead_of_writing(tmp_path: Path) -> None:
    assert compiled_write_queue_runs is not None
    table = ConsumeQueueTable(tmp_path, ENTRIES_PER_FILE)
    cq = table.find_or_create("t", 0)
    cq.put(0, _packed(0, 1))
    cq.queue.files[-1].mm.close()
    with pytest.raises(ValueError, match="closed"):
        compiled_write_queue_runs({("t", 0): (1, _packed(100, 1))}, table.queues, _python_put_never)
    assert cq.max_offset == 1


def _python_put_never(*args: object) -> int:
    raise AssertionError(f"the Python put was called with {args}")
