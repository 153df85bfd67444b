"""TimerLog: the append-only file of fixed-size timer records (RocketMQ's ``timerlog``).

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

import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

__all__ = ("MAGIC_DELETE", "MAGIC_ENTRY", "RECORD", "RECORD_SIZE", "TimerLog", "TimerRecord")

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


class TimerLog:
    """One append-only file; positions are byte offsets. Appends are ``os.write`` calls, so a
    killed process loses nothing it returned from; :meth:`flush` makes them durable (fdatasync)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.end = os.fstat(self._fd).st_size // RECORD_SIZE * RECORD_SIZE

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def append(self, data: bytes) -> int:
        """Append whole encoded records; returns the position of the first."""
        pos = self.end
        view = memoryview(data)
        off = pos
        while view:
            n = os.pwrite(self._fd, view, off)
            view = view[n:]
            off += n
        self.end = off
        return pos

    def read(self, pos: int) -> TimerRecord | None:
        if pos < 0 or pos + RECORD_SIZE > self.end:
            return None
        return TimerRecord.decode(os.pread(self._fd, RECORD_SIZE, pos))

    def read_block(self, pos: int, size: int) -> bytes:
        """Raw bytes ``[pos, pos + size)`` clipped to the end (several records in one read)."""
        size = min(size, self.end - pos)
        return os.pread(self._fd, size, pos) if size > 0 and pos >= 0 else b""

    def scan(self, start: int, chunk: int = 4096) -> Iterator[tuple[int, TimerRecord | None]]:
        """(pos, record) from ``start`` to the end of the file; a None record ends the valid part."""
        size = os.fstat(self._fd).st_size
        pos = start
        while pos + RECORD_SIZE <= size:
            data = os.pread(self._fd, min(chunk * RECORD_SIZE, size - pos), pos)
            for off in range(0, len(data) - RECORD_SIZE + 1, RECORD_SIZE):
                yield pos + off, TimerRecord.decode(data, off)
            pos += len(data) // RECORD_SIZE * RECORD_SIZE

    def truncate(self, end: int) -> None:
        os.ftruncate(self._fd, end)
        self.end = end

    def flush(self) -> None:
        os.fdatasync(self._fd)
