"""TimerLog: the append-only segment files of fixed-size timer records (RocketMQ's ``timerlog``).

Record layout (52 bytes, big-endian)::

    0  4  SIZE          int32, always 52
    4  4  MAGIC         int32, 1 = timer entry, 2 = delete (recall) marker
    8  8  PREV POS      int64, previous record of the same wheel slot (-1: first of the slot)
    16 8  CL OFFSET     int64, commitlog offset of the timer message (delete: of the recalled one)
    24 8  DELIVER MS    int64, delivery time (ms since the epoch)
    32 8  SLOT SECOND   int64, the wheel second the record is linked into (>= DELIVER MS // 1000)
    40 8  QUEUE OFFSET  int64, offset in the timer topic's ConsumeQueue it came from (-1: re-rolled)
    48 4  CRC           uint32, zlib.crc32 of bytes 0..48

A slot's records form a linked list through PREV POS, newest first; the wheel keeps the newest.
"""

from __future__ import annotations

import bisect
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

__all__ = (
    "MAGIC_DELETE",
    "MAGIC_ENTRY",
    "RECORD",
    "RECORD_SIZE",
    "SEGMENT_RECORDS",
    "TimerLog",
    "TimerRecord",
)

RECORD: Final = struct.Struct(">iiqqqqq")
_CRC: Final = struct.Struct(">I")
RECORD_SIZE: Final = RECORD.size + _CRC.size
MAGIC_ENTRY: Final = 1
MAGIC_DELETE: Final = 2


class TimerRecord(NamedTuple):
    magic: int
    prev_pos: int
    cl_offset: int
    deliver_ms: int
    slot_second: int
    queue_offset: int

    def encode(self) -> bytes:
        head = RECORD.pack(
            RECORD_SIZE,
            self.magic,
            self.prev_pos,
            self.cl_offset,
            self.deliver_ms,
            self.slot_second,
            self.queue_offset,
        )
        return head + _CRC.pack(zlib.crc32(head))

    @classmethod
    def decode(cls, data: bytes | memoryview, pos: int = 0) -> TimerRecord | None:
        """The record at ``pos`` of ``data``, or None when it is torn, zeroed or corrupt."""
        if len(data) - pos < RECORD_SIZE:
            return None
        size, magic, prev, cl, deliver, slot, qoff = RECORD.unpack_from(data, pos)
        if size != RECORD_SIZE or magic not in (MAGIC_ENTRY, MAGIC_DELETE):
            return None
        (crc,) = _CRC.unpack_from(data, pos + RECORD.size)
        if crc != zlib.crc32(data[pos : pos + RECORD.size]):
            return None
        return cls(magic, prev, cl, deliver, slot, qoff)


SEGMENT_RECORDS: Final = 1 << 20  # 52 MiB per segment file
_NAME_DIGITS: Final = 20


class _Segment:
    __slots__ = ("fd", "path", "size", "start")

    def __init__(self, path: Path, start: int) -> None:
        self.path = path
        self.start = start
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.size = os.fstat(self.fd).st_size

    @property
    def end(self) -> int:
        return self.start + self.size


class TimerLog:
    """Segment files in a directory, each named by the 20-digit position of its first byte (like
    the CommitLog); positions are byte offsets over the whole log and never reused. Appends are
    ``os.pwrite`` calls, so a killed process loses nothing it returned from; :meth:`flush` makes
    them durable (fdatasync). :meth:`trim` deletes whole segments below a position no pending timer
    needs, so the log's size follows the pending timers, not every timer ever sent."""

    def __init__(self, path: Path, segment_records: int = SEGMENT_RECORDS) -> None:
        if segment_records < 1:
            raise ValueError("a timer log segment holds at least one record")
        self.path = path
        self.segment_bytes = segment_records * RECORD_SIZE
        _adopt_single_file(path)
        path.mkdir(parents=True, exist_ok=True)
        names = sorted(n.name for n in path.iterdir() if n.name.isdigit() and len(n.name) == _NAME_DIGITS)
        self._segments = [_Segment(path / n, int(n)) for n in names]
        self._dirty: set[_Segment] = set()
        if not self._segments:
            self._segments.append(_Segment(path / _name(0), 0))
        last = self._segments[-1]
        last.size = last.size // RECORD_SIZE * RECORD_SIZE  # a torn record is not part of the log
        self.end = last.end

    @property
    def start(self) -> int:
        """The first position still held (below it: trimmed)."""
        return self._segments[0].start

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def close(self) -> None:
        for seg in self._segments:
            if seg.fd >= 0:
                os.close(seg.fd)
                seg.fd = -1

    def append(self, data: bytes) -> int:
        """Append whole encoded records; returns the position of the first."""
        pos = self.end
        view = memoryview(data)
        while view:
            seg = self._segments[-1]
            if seg.size >= self.segment_bytes:
                seg = _Segment(self.path / _name(seg.end), seg.end)
                self._segments.append(seg)
            room = self.segment_bytes - seg.size
            part = view[:room]
            off = seg.size
            while part:
                n = os.pwrite(seg.fd, part, off)
                part = part[n:]
                off += n
            view = view[room:]
            seg.size = off
            self._dirty.add(seg)
        self.end = self._segments[-1].end
        return pos

    def _find(self, pos: int) -> int:
        """Index of the segment holding ``pos`` (start <= pos)."""
        return bisect.bisect_right(self._segments, pos, key=lambda seg: seg.start) - 1

    def read(self, pos: int) -> TimerRecord | None:
        if pos < self.start or pos + RECORD_SIZE > self.end:
            return None
        return TimerRecord.decode(self.read_block(pos, RECORD_SIZE))

    def read_block(self, pos: int, size: int) -> bytes:
        """Raw bytes ``[pos, pos + size)`` clipped to the end (several records in one read); trimmed
        positions read as zeros, which decode as no record."""
        size = min(size, self.end - pos)
        if size <= 0 or pos < 0:
            return b""
        parts = []
        if pos < self.start:
            gap = min(self.start - pos, size)
            parts.append(bytes(gap))
            pos, size = pos + gap, size - gap
        i = self._find(pos) if size else len(self._segments)
        while size > 0 and i < len(self._segments):
            seg = self._segments[i]
            n = min(size, seg.end - pos)
            parts.append(os.pread(seg.fd, n, pos - seg.start))
            pos, size, i = pos + n, size - n, i + 1
        return b"".join(parts)

    def scan(self, start: int, chunk: int = 4096) -> Iterator[tuple[int, TimerRecord | None]]:
        """(pos, record) from ``start`` to the end of the files (a torn tail included); a None
        record ends the valid part."""
        pos = max(start, self.start)
        for seg in self._segments[self._find(pos) :]:
            size = os.fstat(seg.fd).st_size
            while pos - seg.start + RECORD_SIZE <= size:
                rel = pos - seg.start
                data = os.pread(seg.fd, min(chunk * RECORD_SIZE, size - rel), rel)
                for off in range(0, len(data) - RECORD_SIZE + 1, RECORD_SIZE):
                    yield pos + off, TimerRecord.decode(data, off)
                pos += len(data) // RECORD_SIZE * RECORD_SIZE
            if pos < seg.start + size:
                return  # a torn record: nothing after it is part of the log

    def truncate(self, end: int) -> None:
        """Drop everything from ``end`` on (a torn or unlinked tail found by recovery)."""
        end = max(end, self.start)
        while len(self._segments) > 1 and self._segments[-1].start >= end:
            seg = self._segments.pop()
            os.close(seg.fd)
            seg.path.unlink(missing_ok=True)
            self._dirty.discard(seg)
        seg = self._segments[-1]
        os.ftruncate(seg.fd, end - seg.start)
        seg.size = end - seg.start
        self.end = end

    def trim(self, before: int) -> int:
        """Delete the segments that end at or below ``before`` (never the one appended to);
        returns the bytes freed."""
        freed = 0
        while len(self._segments) > 1 and self._segments[0].end <= before:
            seg = self._segments.pop(0)
            os.close(seg.fd)
            seg.path.unlink(missing_ok=True)
            self._dirty.discard(seg)
            freed += seg.size
        return freed

    def flush(self) -> None:
        for seg in list(self._dirty) or self._segments[-1:]:
            if seg.fd >= 0:
                os.fdatasync(seg.fd)
        self._dirty.clear()


def _name(start: int) -> str:
    return f"{start:0{_NAME_DIGITS}d}"


def _adopt_single_file(path: Path) -> None:
    """Earlier versions kept the log in one file at ``path``: it becomes the first segment (a crash
    half-way is finished on the next start)."""
    legacy = path.with_name(path.name + ".single")
    if path.is_file():
        path.replace(legacy)
    if legacy.is_file():
        path.mkdir(parents=True, exist_ok=True)
        legacy.replace(path / _name(0))
