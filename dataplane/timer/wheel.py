"""TimerWheel: a fixed array of one-second slots in a memory-mapped file (RocketMQ's ``timerwheel``).

File layout (big-endian): a 16-byte header (MAGIC ``b"MQTW"``, version int32 1, SLOT COUNT int64),
then SLOT COUNT slots of 32 bytes::

    0  8  SECOND     int64, the epoch second the slot holds now (slots are reused every round)
    8  8  FIRST POS  int64, oldest timer-log record of that second
    16 8  LAST POS   int64, newest timer-log record (head of the linked list)
    24 4  LINKED     int32, records linked (entries and delete markers)
    28 4  reserved

Second ``s`` lives in slot ``s % SLOT COUNT``; a slot whose SECOND differs from ``s`` is empty for
``s``. Memory is the mapping (32 bytes per slot), whatever the number of pending timers.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

__all__ = ("SLOT", "Slot", "TimerWheel")

_HEADER: Final = struct.Struct(">4siq")
SLOT: Final = struct.Struct(">qqqii")
_MAGIC: Final = b"MQTW"


class Slot(NamedTuple):
    second: int
    first_pos: int
    last_pos: int
    linked: int


_EMPTY = Slot(-1, -1, -1, 0)
_EMPTY_RAW: Final = SLOT.pack(*_EMPTY, 0)
# Slots compared at once when looking for occupied ones (128 KiB): the wheel of the default 3-day
# delay has 518,400 slots, and reading them one by one took about a second at every start.
_CHUNK_SLOTS: Final = 4096
_EMPTY_CHUNK: Final = _EMPTY_RAW * _CHUNK_SLOTS


class TimerWheel:
    """The mapped slot array. Not thread-safe: the timer service serialises writers."""

    def __init__(self, path: Path, slot_count: int) -> None:
        if slot_count < 2:
            raise ValueError("a timer wheel needs at least 2 slots")
        self.path = path
        self.slot_count = slot_count
        path.parent.mkdir(parents=True, exist_ok=True)
        size = _HEADER.size + slot_count * SLOT.size
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            existing = os.fstat(fd).st_size
            header = os.pread(fd, _HEADER.size, 0) if existing >= _HEADER.size else b""
            #: False when the file was missing or had another shape: the caller must rebuild it
            self.loaded = existing == size and header == _HEADER.pack(_MAGIC, 1, slot_count)
            if not self.loaded:
                os.ftruncate(fd, 0)
                os.ftruncate(fd, size)
                os.pwrite(fd, _HEADER.pack(_MAGIC, 1, slot_count), 0)
            self._map = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd  # kept for flush(): see there
        if not self.loaded:
            self.reset()

    def reset(self) -> None:
        self._map[_HEADER.size :] = _EMPTY_RAW * self.slot_count

    def _at(self, second: int) -> int:
        return _HEADER.size + (second % self.slot_count) * SLOT.size

    def get(self, second: int) -> Slot:
        """The slot of ``second``; empty (positions -1) when it holds another second."""
        got = Slot(*SLOT.unpack_from(self._map, self._at(second))[:4])
        return got if got.second == second else Slot(second, -1, -1, 0)

    def put(self, slot: Slot) -> None:
        SLOT.pack_into(self._map, self._at(slot.second), *slot, 0)

    def link(self, second: int, pos: int) -> int:
        """Make ``pos`` the newest record of ``second``; returns the previous newest (-1: none)."""
        slot = self.get(second)
        if slot.last_pos < 0:
            self.put(Slot(second, pos, pos, 1))
            return -1
        self.put(Slot(second, slot.first_pos, pos, slot.linked + 1))
        return slot.last_pos

    def _occupied(self) -> Iterator[tuple[int, int, int, int, int]]:
        """The raw slots that hold a second, in slot order: chunks still as :meth:`reset` left them
        are skipped whole (one compare), the others read slot by slot."""
        total = self.slot_count * SLOT.size
        step = len(_EMPTY_CHUNK)
        for at in range(_HEADER.size, _HEADER.size + total, step):
            chunk = self._map[at : min(at + step, _HEADER.size + total)]
            if chunk == _EMPTY_CHUNK[: len(chunk)]:
                continue
            for raw in SLOT.iter_unpack(chunk):
                if raw[0] >= 0:
                    yield raw

    def slots(self) -> list[Slot]:
        """Every slot that holds a second (for recovery checks); O(slot count), fast when empty."""
        return [Slot(second, first, last, linked) for second, first, last, linked, _ in self._occupied()]

    def oldest_pos(self, from_second: int) -> int:
        """The smallest FIRST POS of the slots holding ``from_second`` or a later second (-1: none):
        every timer-log record a pending second needs lies at or after it. O(slot count)."""
        best = -1
        for second, first, _last, _linked, _ in self._occupied():
            if second >= from_second and first >= 0 and (best < 0 or first < best):
                best = first
        return best

    def flush(self) -> None:
        # fdatasync, not mmap.flush(): CPython holds the GIL through msync, which stalls every
        # other thread (the broker's event loop) for the whole write-back; on Linux fdatasync
        # writes back the pages dirtied through a shared mapping just the same.
        os.fdatasync(self._fd)

    def close(self) -> None:
        if not self._map.closed:
            self.flush()
            self._map.close()
            os.close(self._fd)
