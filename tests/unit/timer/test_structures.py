"""Timer log and timer wheel: encoding, slot linking, recovery of the on-disk shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.timer.checkpoint import TimerCheckpoint
from dataplane.timer.recall import InvalidRecallHandle, RecallCodec, RecallHandle
from dataplane.timer.scanner import read_slot
from dataplane.timer.timer_log import MAGIC_DELETE, MAGIC_ENTRY, RECORD_SIZE, TimerLog, TimerRecord
from dataplane.timer.wheel import TimerWheel


def test_record_round_trip_and_corruption() -> None:
    rec = TimerRecord(MAGIC_ENTRY, -1, 123_456, 1_700_000_000_123, 1_700_000_000, 42)
    data = rec.encode()
    assert len(data) == RECORD_SIZE == 52
    assert TimerRecord.decode(data) == rec
    assert TimerRecord.decode(data[:-1]) is None
    assert TimerRecord.decode(bytes(RECORD_SIZE)) is None
    flipped = bytearray(data)
    flipped[20] ^= 1
    assert TimerRecord.decode(bytes(flipped)) is None


def test_log_append_read_scan_truncate(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "timerlog")
    recs = [TimerRecord(MAGIC_ENTRY, -1, i, 1000 * i, i, i) for i in range(5)]
    pos = log.append(b"".join(r.encode() for r in recs))
    assert pos == 0 and log.end == 5 * RECORD_SIZE
    assert log.read(2 * RECORD_SIZE) == recs[2]
    assert log.read(5 * RECORD_SIZE) is None
    assert [r for _, r in log.scan(0)] == recs
    log.truncate(3 * RECORD_SIZE)
    log.close()
    reopened = TimerLog(tmp_path / "timerlog")
    assert reopened.end == 3 * RECORD_SIZE
    reopened.close()


def _append(log: TimerLog, wheel: TimerWheel, magic: int, cl: int, second: int) -> int:
    prev = wheel.get(second).last_pos
    pos = log.append(TimerRecord(magic, prev, cl, second * 1000 + 1, second, -1).encode())
    wheel.link(second, pos)
    return pos


def test_wheel_links_slots_and_skips_recalled(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "timerlog")
    wheel = TimerWheel(tmp_path / "timerwheel", 10)
    for cl in (100, 200, 300):
        _append(log, wheel, MAGIC_ENTRY, cl, 1005)
    _append(log, wheel, MAGIC_ENTRY, 400, 1006)
    _append(log, wheel, MAGIC_DELETE, 200, 1005)
    assert wheel.get(1005).linked == 4
    assert read_slot(log, wheel, 1005).cl_offsets.tolist() == [100, 300]
    assert read_slot(log, wheel, 1005).deliver_ms.tolist() == [1005_001, 1005_001]
    assert read_slot(log, wheel, 1006).cl_offsets.tolist() == [400]
    # the same slot one round later holds another second: the old list is not seen
    assert read_slot(log, wheel, 1015).cl_offsets.tolist() == []
    _append(log, wheel, MAGIC_ENTRY, 500, 1015)
    assert read_slot(log, wheel, 1015).cl_offsets.tolist() == [500]
    wheel.close()
    reopened = TimerWheel(tmp_path / "timerwheel", 10)
    assert reopened.loaded and reopened.get(1006).last_pos == 3 * RECORD_SIZE
    reopened.close()
    resized = TimerWheel(tmp_path / "timerwheel", 20)
    assert not resized.loaded and resized.get(1006).last_pos == -1
    resized.close()
    log.close()


def test_contiguous_slot_is_read_as_one_run(tmp_path: Path) -> None:
    """A second whose records are one run of the log (timers sent in delivery order) is read in one
    pass; a recall marker inside the run still removes its entry."""
    log = TimerLog(tmp_path / "timerlog")
    wheel = TimerWheel(tmp_path / "timerwheel", 10)
    _append(log, wheel, MAGIC_ENTRY, 1, 2001)
    for cl in range(100, 110):
        _append(log, wheel, MAGIC_ENTRY, cl, 2002)
    _append(log, wheel, MAGIC_DELETE, 105, 2002)
    _append(log, wheel, MAGIC_ENTRY, 2, 2003)
    got = read_slot(log, wheel, 2002)
    assert got.cl_offsets.tolist() == [100, 101, 102, 103, 104, 106, 107, 108, 109]
    assert got.deliver_ms.tolist() == [2002_001] * 9
    assert read_slot(log, wheel, 2001).cl_offsets.tolist() == [1]
    log.close()
    wheel.close()


def test_corrupt_record_in_a_run_stops_the_slot_there(tmp_path: Path) -> None:
    """A damaged record is never delivered: the run check fails, and following the list from the
    newest record stops at the damage (what the list walk always did)."""
    log = TimerLog(tmp_path / "timerlog")
    wheel = TimerWheel(tmp_path / "timerwheel", 10)
    positions = [_append(log, wheel, MAGIC_ENTRY, cl, 3000) for cl in range(10, 16)]
    assert read_slot(log, wheel, 3000).cl_offsets.tolist() == [10, 11, 12, 13, 14, 15]
    with open(tmp_path / "timerlog", "r+b") as f:
        f.seek(positions[2] + 20)  # inside CL OFFSET of the third record
        f.write(b"\xff")
    assert read_slot(log, wheel, 3000).cl_offsets.tolist() == [13, 14, 15]
    log.close()
    wheel.close()


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    cp = TimerCheckpoint(1_700_000_000, 520, 10)
    cp.save(tmp_path / "checkpoint")
    assert TimerCheckpoint.load(tmp_path / "checkpoint") == cp
    assert TimerCheckpoint.decode(cp.encode()[:-1] + b"\x00") is None
    assert TimerCheckpoint.load(tmp_path / "missing") is None


def test_recall_handle_signed() -> None:
    codec = RecallCodec(b"k" * 32)
    handle = RecallHandle("ns%topic", "0102AB", 1_700_000_000_500, 4096)
    text = codec.encode(handle)
    assert codec.decode(text) == handle
    with pytest.raises(InvalidRecallHandle):
        RecallCodec(b"x" * 32).decode(text)
    with pytest.raises(InvalidRecallHandle):
        codec.decode("garbage")
    with pytest.raises(InvalidRecallHandle):
        codec.decode("")
