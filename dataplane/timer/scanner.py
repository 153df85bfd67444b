"""Reading one wheel second: follow the slot's linked list through the timer log."""

from __future__ import annotations

import zlib

from dataplane.timer.timer_log import (
    _CRC,
    MAGIC_DELETE,
    MAGIC_ENTRY,
    RECORD,
    RECORD_SIZE,
    TimerLog,
    TimerRecord,
)
from dataplane.timer.wheel import TimerWheel

__all__ = ("read_slot",)


_BLOCK_RECORDS = 4096  # one pread brings this many records (213 KB); records never straddle blocks


def read_slot(log: TimerLog, wheel: TimerWheel, second: int) -> list[TimerRecord]:
    """The live timer entries of ``second``, oldest first; recalled entries (a delete marker for
    their commitlog offset in the same slot) are left out.

    The slot's list is followed through blocks of the log read whole and cached for the call: the
    records of one second are mostly near each other, so this is a few reads instead of one per record.
    """
    slot = wheel.get(second)
    entries: list[TimerRecord] = []
    deleted: set[int] = set()
    pos = slot.last_pos
    seen = 0
    block_size = _BLOCK_RECORDS * RECORD_SIZE
    blocks: dict[int, bytes] = {}
    unpack, crc32, body = RECORD.unpack_from, zlib.crc32, RECORD.size
    crc_unpack = _CRC.unpack_from
    first_pos, linked = slot.first_pos, slot.linked
    while pos >= 0 and seen <= linked:
        if pos % RECORD_SIZE or pos + RECORD_SIZE > log.end:
            break
        index = pos // block_size
        block = blocks.get(index)
        if block is None:
            if len(blocks) >= 64:  # a slot spread over the whole log: bound the cache (13 MB)
                blocks.clear()
            block = blocks[index] = log.read_block(index * block_size, block_size)
        off = pos - index * block_size
        if len(block) - off < RECORD_SIZE:
            break
        size, magic, prev, cl, deliver, slot_second, qoff = unpack(block, off)
        if size != RECORD_SIZE or slot_second != second or magic not in (MAGIC_ENTRY, MAGIC_DELETE):
            break
        if crc_unpack(block, off + body)[0] != crc32(memoryview(block)[off : off + body]):
            break
        if magic == MAGIC_DELETE:
            deleted.add(cl)
        else:
            entries.append(TimerRecord(magic, prev, cl, deliver, slot_second, qoff))
        seen += 1
        if pos == first_pos:
            break
        pos = prev
    entries.reverse()
    if deleted:
        entries = [e for e in entries if e.cl_offset not in deleted]
    return entries
