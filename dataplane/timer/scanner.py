"""Reading one wheel second: follow the slot's linked list through the timer log."""

from __future__ import annotations

from dataplane.timer.timer_log import MAGIC_DELETE, TimerLog, TimerRecord
from dataplane.timer.wheel import TimerWheel

__all__ = ("read_slot",)


def read_slot(log: TimerLog, wheel: TimerWheel, second: int) -> list[TimerRecord]:
    """The live timer entries of ``second``, oldest first; recalled entries (a delete marker for
    their commitlog offset in the same slot) are left out."""
    slot = wheel.get(second)
    entries: list[TimerRecord] = []
    deleted: set[int] = set()
    pos = slot.last_pos
    seen = 0
    while pos >= 0 and seen <= slot.linked:
        rec = log.read(pos)
        if rec is None or rec.slot_second != second:
            break
        if rec.magic == MAGIC_DELETE:
            deleted.add(rec.cl_offset)
        else:
            entries.append(rec)
        seen += 1
        if pos == slot.first_pos:
            break
        pos = rec.prev_pos
    entries.reverse()
    if deleted:
        entries = [e for e in entries if e.cl_offset not in deleted]
    return entries
