"""Reading one wheel second: follow the slot's linked list through the timer log.

The result is two compact arrays (commitlog offset, delivery ms; 16 bytes per timer), not one
object per timer: a second can hold a million timers ("deliver at midnight").
"""

from __future__ import annotations

import struct
import zlib
from array import array
from typing import Final, NamedTuple

from dataplane.timer.timer_log import (
    _CRC,
    MAGIC_DELETE,
    MAGIC_ENTRY,
    RECORD,
    RECORD_SIZE,
    TimerLog,
)
from dataplane.timer.wheel import TimerWheel

__all__ = ("SlotEntries", "read_slot")


_BLOCK_RECORDS = 4096  # one pread brings this many records (213 KB); records never straddle blocks
_RUN_RECORDS = 65536  # a contiguous slot is read and checked this many records (3.4 MB) at a time
_WHOLE: Final = struct.Struct(RECORD.format + _CRC.format.lstrip(">"))  # a record with its CRC


class SlotEntries(NamedTuple):
    """The live timers of one second, oldest first: ``cl_offsets[i]`` is due at ``deliver_ms[i]``."""

    cl_offsets: array[int]
    deliver_ms: array[int]


def _empty() -> SlotEntries:
    return SlotEntries(array("q"), array("q"))


def read_slot(log: TimerLog, wheel: TimerWheel, second: int) -> SlotEntries:
    """The live timer entries of ``second``, oldest first; recalled entries (a delete marker for
    their commitlog offset in the same slot) are left out.

    When the slot's records are one contiguous run of the log (timers sent in delivery order, the
    usual case for a steady stream), the run is read and checked with ``struct.iter_unpack``;
    otherwise the list is followed through blocks of the log read whole and cached for the call.
    """
    slot = wheel.get(second)
    if slot.last_pos < 0 or slot.linked <= 0:
        return _empty()
    span = slot.last_pos - slot.first_pos
    contiguous = slot.first_pos >= 0 and span >= 0 and span % RECORD_SIZE == 0
    if contiguous and span // RECORD_SIZE + 1 == slot.linked:
        got = _read_run(log, second, slot.first_pos, slot.linked)
        if got is not None:
            return got
    return _follow(log, second, slot.last_pos, slot.first_pos, slot.linked)


def _read_run(log: TimerLog, second: int, first_pos: int, count: int) -> SlotEntries | None:
    """``count`` records from ``first_pos``, each linked to the one before; None when they are not
    exactly that (the caller then follows the list)."""
    cls, delivers = array("q"), array("q")
    deleted: set[int] = set()
    crc32, body = zlib.crc32, RECORD.size
    pos, prev_expected = first_pos, -2  # the first record's PREV POS is not checked
    done = 0
    while done < count:
        n = min(count - done, _RUN_RECORDS)
        data = log.read_block(pos, n * RECORD_SIZE)
        if len(data) != n * RECORD_SIZE:
            return None
        view = memoryview(data)
        off = 0
        for size, magic, prev, cl, deliver, slot_second, _qoff, crc in _WHOLE.iter_unpack(data):
            if size != RECORD_SIZE or slot_second != second:
                return None
            if prev != prev_expected and prev_expected != -2:
                return None
            if crc != crc32(view[off : off + body]):
                return None
            if magic == MAGIC_ENTRY:
                cls.append(cl)
                delivers.append(deliver)
            elif magic == MAGIC_DELETE:
                deleted.add(cl)
            else:
                return None
            prev_expected = pos + off
            off += RECORD_SIZE
        pos += off
        done += n
    return _without(SlotEntries(cls, delivers), deleted)


def _follow(log: TimerLog, second: int, last_pos: int, first_pos: int, linked: int) -> SlotEntries:
    """The slot's list from its newest record back, through cached blocks of the log."""
    cls, delivers = array("q"), array("q")
    deleted: set[int] = set()
    pos = last_pos
    seen = 0
    block_size = _BLOCK_RECORDS * RECORD_SIZE
    blocks: dict[int, memoryview] = {}
    unpack, crc32, body = _WHOLE.unpack_from, zlib.crc32, RECORD.size
    while pos >= 0 and seen <= linked:
        if pos % RECORD_SIZE or pos + RECORD_SIZE > log.end:
            break
        index = pos // block_size
        block = blocks.get(index)
        if block is None:
            if len(blocks) >= 64:  # a slot spread over the whole log: bound the cache (13 MB)
                blocks.clear()
            block = blocks[index] = memoryview(log.read_block(index * block_size, block_size))
        off = pos - index * block_size
        if len(block) - off < RECORD_SIZE:
            break
        size, magic, prev, cl, deliver, slot_second, _qoff, crc = unpack(block, off)
        if size != RECORD_SIZE or slot_second != second or magic not in (MAGIC_ENTRY, MAGIC_DELETE):
            break
        if crc != crc32(block[off : off + body]):
            break
        if magic == MAGIC_DELETE:
            deleted.add(cl)
        else:
            cls.append(cl)
            delivers.append(deliver)
        seen += 1
        if pos == first_pos:
            break
        pos = prev
    cls.reverse()
    delivers.reverse()
    return _without(SlotEntries(cls, delivers), deleted)


def _without(entries: SlotEntries, deleted: set[int]) -> SlotEntries:
    if not deleted:
        return entries
    keep = [i for i, cl in enumerate(entries.cl_offsets) if cl not in deleted]
    return SlotEntries(
        array("q", (entries.cl_offsets[i] for i in keep)), array("q", (entries.deliver_ms[i] for i in keep))
    )
