"""Timer log and timer wheel: encoding, slot linking, recovery of the on-disk shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.timer.checkpoint import TimerCheckpoint
from dataplane.timer.recall import InvalidRecallHandle, RecallCodec, RecallHandle
from dataplane.timer.scanner import read_slot
from dataplane.timer.timer_log import MAGIC_DELETE, MAGIC_ENTRY, RECORD_SIZE, TimerLog, TimerRecord
from dataplane.timer.wheel import Slot, TimerWheel


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


def test_log_segments_roll_read_across_and_trim(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "timerlog", segment_records=4)
    recs = [TimerRecord(MAGIC_ENTRY, -1, i, 1000 * i, i, i) for i in range(10)]
    # one append crossing two segment boundaries
    assert log.append(b"".join(r.encode() for r in recs[:7])) == 0
    log.append(b"".join(r.encode() for r in recs[7:]))
    names = sorted(p.name for p in (tmp_path / "timerlog").iterdir())
    assert names == [f"{0:020d}", f"{4 * RECORD_SIZE:020d}", f"{8 * RECORD_SIZE:020d}"]
    assert [log.read(i * RECORD_SIZE) for i in range(10)] == recs
    block = log.read_block(3 * RECORD_SIZE, 6 * RECORD_SIZE)  # spans three files
    assert [TimerRecord.decode(block, i * RECORD_SIZE) for i in range(6)] == recs[3:9]
    assert [r for _, r in log.scan(2 * RECORD_SIZE)] == recs[2:]
    # trimming deletes whole segments below the position only, never the one appended to
    assert log.trim(6 * RECORD_SIZE) == 4 * RECORD_SIZE
    assert log.start == 4 * RECORD_SIZE and log.segment_count == 2
    assert log.read(2 * RECORD_SIZE) is None
    gap = log.read_block(2 * RECORD_SIZE, 3 * RECORD_SIZE)  # trimmed bytes read as no record
    assert gap[: 2 * RECORD_SIZE] == bytes(2 * RECORD_SIZE)
    assert TimerRecord.decode(gap, 2 * RECORD_SIZE) == recs[4]
    assert [r for _, r in log.scan(0)] == recs[4:]
    assert log.trim(10**9) == 4 * RECORD_SIZE and log.segment_count == 1
    log.close()
    # positions survive a restart; a truncation drops whole later files
    reopened = TimerLog(tmp_path / "timerlog", segment_records=4)
    assert (reopened.start, reopened.end) == (8 * RECORD_SIZE, 10 * RECORD_SIZE)
    reopened.append(b"".join(r.encode() for r in recs[:4]))
    assert reopened.segment_count == 2
    reopened.truncate(9 * RECORD_SIZE)
    assert reopened.segment_count == 1 and reopened.end == 9 * RECORD_SIZE
    assert reopened.read(8 * RECORD_SIZE) == recs[8]
    reopened.close()


def test_log_of_one_file_becomes_the_first_segment(tmp_path: Path) -> None:
    """Earlier versions wrote the whole log to one file: it is adopted at start, positions kept."""
    recs = [TimerRecord(MAGIC_ENTRY, -1, i, 1000 * i, i, i) for i in range(6)]
    (tmp_path / "timerlog").write_bytes(b"".join(r.encode() for r in recs) + b"torn")
    log = TimerLog(tmp_path / "timerlog", segment_records=4)
    assert (log.start, log.end) == (0, 6 * RECORD_SIZE)
    assert [r for _, r in log.scan(0)][:6] == recs
    assert log.append(recs[0].encode()) == 6 * RECORD_SIZE  # the first file is full: a new one
    assert log.read(6 * RECORD_SIZE) == recs[0]
    assert log.segment_count == 2
    log.close()


def test_wheel_oldest_pending_position(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "timerlog")
    wheel = TimerWheel(tmp_path / "timerwheel", 10)
    assert wheel.oldest_pos(0) == -1
    a = _append(log, wheel, MAGIC_ENTRY, 1, 1003)
    b = _append(log, wheel, MAGIC_ENTRY, 2, 1001)
    _append(log, wheel, MAGIC_ENTRY, 3, 1003)
    assert wheel.oldest_pos(1000) == a
    assert wheel.oldest_pos(1002) == a
    assert wheel.oldest_pos(1004) == -1
    assert b > a and wheel.oldest_pos(1001) == a
    log.close()
    wheel.close()


def test_wheel_finds_occupied_slots_across_chunks_and_after_reopening(tmp_path: Path) -> None:
    # more slots than one compared chunk (4,096), and a count that is no multiple of it
    count = 3 * 4096 + 5
    wheel = TimerWheel(tmp_path / "timerwheel", count)
    assert wheel.slots() == [] and wheel.oldest_pos(0) == -1
    seconds = [0, 4095, 4096, 2 * 4096 + 7, count - 1]  # chunk edges, a middle one, the short last chunk
    for i, second in enumerate(seconds):
        wheel.link(second, 100 * (len(seconds) - i))
    assert wheel.oldest_pos(4096) == 100  # the last three seconds: 300, 200, 100
    assert wheel.oldest_pos(count) == -1
    wheel.link(count + 3, 7)  # a later round reuses slot 3
    expected = [Slot(s, 100 * (len(seconds) - i), 100 * (len(seconds) - i), 1) for i, s in enumerate(seconds)]
    expected.insert(1, Slot(count + 3, 7, 7, 1))
    assert wheel.slots() == expected
    assert wheel.oldest_pos(0) == wheel.oldest_pos(count) == 7
    assert wheel.oldest_pos(count + 4) == -1
    wheel.close()
    reopened = TimerWheel(tmp_path / "timerwheel", count)
    assert reopened.loaded and reopened.slots() == expected
    reopened.reset()
    assert reopened.slots() == []
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
    with open(tmp_path / "timerlog" / f"{0:020d}", "r+b") as f:
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
