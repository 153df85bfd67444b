"""IndexFile: a hash index from message key to CommitLog offset, for lookups in a time range.

Byte layout (big-endian)::

    header, 40 bytes
      0  8  BEGIN TIMESTAMP     int64 ms, store time of the first entry
      8  8  END TIMESTAMP       int64 ms, store time of the last entry
      16 8  BEGIN PHY OFFSET    int64, commitlog offset of the first entry
      24 8  END PHY OFFSET      int64, commitlog offset of the last entry
      32 4  HASH SLOT COUNT     int32, slots in use
      36 4  INDEX COUNT         int32, next entry number (entries are numbered from 1)
    hash slots, slot_num x 4 bytes
      0  4  HEAD                int32, number of the newest entry in this slot's chain (0 = empty)
    entries, max_num x 20 bytes (entry n at 40 + slot_num*4 + n*20)
      0  4  KEY HASH            int32, crc32(key) & 0x7FFFFFFF
      4  8  PHY OFFSET          int64
      12 4  TIME DIFF           int32, seconds since BEGIN TIMESTAMP
      16 4  PREV                int32, previous entry of the chain (0 = end); always < this entry

Files live in ``<store_dir>/index/``, named by the 20-digit BEGIN PHY OFFSET. No CRC: keys are
re-checked against the CommitLog on every read, so a collision or a stale entry is never returned.

Nothing is written through a mapping: the kernel write-protects a page written through a shared
mapping when it writes it back, with a TLB shootdown (an interrupt of every other CPU; on a VM an
exit to the hypervisor each) per page, and the next write to it faults. The hash slots are random
by design, so thousands of their pages were dirty at every flush of the index, and each flush took
20-30 ms of the broker's event loop in one go (docs/benchmarks.md, "Pauses on the event loop").

So a file being written keeps its hash slots in memory (``slot_table``, read from the file at its
first key after opening, with a map of the 4 KiB pages changed since), and its newest entries too: a
put appends them to a tail in memory (lookups read them there), written to the file in one pwrite
when it holds ``_TAIL_BYTES``, at a flush and at close; a single send's key then costs no system
call of its own. Every write of entries holds the file's lock; a flush copies each run of changed
slot pages under the lock right after writing the tail, and writes the copy once it let the lock go
(a put waits for a copy, not a write), so on disk no slot points at an entry that is not there.
:meth:`IndexFile.flush` writes the tail and the changed slot pages, then the header as it stood when
the flush began, then fsyncs. On disk, then, the header (INDEX COUNT, END PHY OFFSET) is never ahead
of the entries and slots: recovery re-indexes from END PHY OFFSET whatever a crash (a killed process
too: the slots and tail in memory go with it) left out. Slots copied may be newer than the header;
entries they point at were written before them, and a file opened for writing numbers its next entry
past every slot (:meth:`_open_slots`), so none of those is overwritten. A key indexed again after a
crash has two entries; lookups return each offset once (``IndexService.select``).
"""

from __future__ import annotations

import array
import logging
import os
import struct
import sys
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from dataplane.store.mapped_file import MappedFile
from dataplane.store.record import compiled_index_newest_slot, compiled_index_put_keys

__all__ = ("INDEX_ENTRY", "INDEX_HEADER", "IndexFile", "key_hash")

logger = logging.getLogger(__name__)

INDEX_HEADER: Final = struct.Struct(
    ">"
    "q"  # BEGIN TIMESTAMP
    "q"  # END TIMESTAMP
    "q"  # BEGIN PHY OFFSET
    "q"  # END PHY OFFSET
    "i"  # HASH SLOT COUNT
    "i"  # INDEX COUNT
)
INDEX_ENTRY: Final = struct.Struct(
    ">"
    "i"  # KEY HASH
    "q"  # PHY OFFSET
    "i"  # TIME DIFF
    "i"  # PREV
)
_SLOT: Final = struct.Struct(">i")
_MAX_DIFF: Final = 2**31 - 1  # TIME DIFF is an int32 of seconds
_SLOTS_AT: Final = INDEX_HEADER.size
_SLOT_SIZE: Final = _SLOT.size
_ENTRY_SIZE: Final = INDEX_ENTRY.size
_PAGE: Final = 4096  # bytes of hash slots per entry of the changed-page map
# Changed slot pages copied per hold of the file's lock at a flush (a put waits for the copy), then
# written: 64 KiB is a copy of some microseconds.
_PAGES_PER_WRITE: Final = 16
# Entries kept in memory before a put writes them out: one pwrite per 3,277 keys.
_TAIL_BYTES: Final = 64 << 10


def key_hash(key: str) -> int:
    return zlib.crc32(key.encode()) & 0x7FFFFFFF


class IndexFile:
    """One index file; appends under the store's put lock, lock-free reads.

    Guarantees: a chain only points backwards (PREV < entry number), so traversal always ends even
    over stale bytes left by a crash; :meth:`select` returns candidate offsets to be verified. A
    damaged header (``damaged``) leaves the file read-only.
    """

    def __init__(self, path: Path, slot_num: int, max_num: int):
        self.slot_num = slot_num
        self.max_num = max_num
        self._entries_at = INDEX_HEADER.size + slot_num * _SLOT.size
        size = self._entries_at + (max_num + 1) * INDEX_ENTRY.size
        self.file = MappedFile(path, size, preallocate=False, random_access=True)
        mm = self.file.mm
        # The hash slots of a file being written and the pages of them changed since the last flush
        # (see the module docstring); None until a key goes in, and again once a full file's slots
        # are on disk: lookups read the file then. ``_lock``: a put and the flush's view of it.
        self.slot_table: bytearray | None = None
        self._changed = bytearray()
        self._lock = threading.Lock()
        # The entries not yet in the file and the number of its first: one tuple, replaced whole when
        # the tail is written, so a lock-free lookup sees a tail and its numbering that agree.
        self._tail: tuple[bytearray, int] = (bytearray(), 1)
        self._tail_limit = _TAIL_BYTES  # raised past a failed write, so a full disk is not tried per put
        self.begin_timestamp: int
        self.end_timestamp: int
        self.begin_phy_offset: int
        self.end_phy_offset: int
        self.hash_slot_count: int
        self.index_count: int
        (
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        ) = INDEX_HEADER.unpack_from(mm, 0)
        # A header that contradicts itself was damaged: its times cannot bound a lookup, and no key is
        # added to the file (the next put opens a new one). Lookups still walk its chains; every
        # candidate is checked against the CommitLog record, store time included.
        self.damaged = not (0 <= self.index_count <= max_num + 1 and 0 <= self.hash_slot_count <= max_num)
        if self.index_count > 1:
            self.damaged |= (
                not 0 <= self.begin_timestamp <= self.end_timestamp
                or (self.end_timestamp - self.begin_timestamp) // 1000 > _MAX_DIFF
                or self.begin_phy_offset != int(path.name)
                or self.end_phy_offset < self.begin_phy_offset
            )
        self.sealed = False
        if self.index_count <= 0:
            self.index_count = 1
            self.begin_phy_offset = self.end_phy_offset = int(path.name)
        elif self.index_count > max_num + 1:
            self.index_count = max_num + 1

    @property
    def is_full(self) -> bool:
        return self.damaged or self.sealed or self.index_count > self.max_num

    def put_key(self, key: str, physical_offset: int, store_timestamp: int) -> bool:
        """Add ``key -> physical_offset``; False when the file is full."""
        return self.put_keys([(key, physical_offset)], 0, store_timestamp) == 1

    def put_keys(self, items: Sequence[tuple[str, int]], start: int, store_timestamp: int) -> int:
        """Add ``items[start:]`` (key, physical offset) until the file is full; how many were added.

        A batch's entries and slots are written first and the header and ``index_count`` once at
        the end, so a lock-free :meth:`select` never follows a chain into an entry not yet written.
        """
        if self.is_full or start >= len(items):
            return 0
        if self.index_count == 1:
            self.begin_timestamp = store_timestamp
        diff = max(0, (store_timestamp - self.begin_timestamp) // 1000)
        if diff > _MAX_DIFF:  # TIME DIFF would overflow: the next key goes to a new file
            self.sealed = True
            return 0
        with self._lock:
            return self._put_keys(items, start, store_timestamp, diff)

    def _put_keys(self, items: Sequence[tuple[str, int]], start: int, store_timestamp: int, diff: int) -> int:
        table = self.slot_table if self.slot_table is not None else self._open_slots()
        number, slots = self.index_count, self.hash_slot_count
        end = min(len(items), start + self.max_num + 1 - number)
        tail = self._tail[0]  # numbered up to ``number``: puts and tail writes hold the lock
        if compiled_index_put_keys is not None:  # the same loop in C (tests/unit/store/test_index.py)
            number, slots, physical_offset, error = compiled_index_put_keys(
                table,
                self._changed,
                tail,
                items if type(items) is list else list(items),
                start,
                end,
                self.slot_num,
                number,
                slots,
                diff,
                self.end_phy_offset,
            )
        else:
            number, slots, physical_offset, error = self._put_keys_python(
                table, tail, items, start, end, number, slots, diff
            )
        if number != self.index_count:
            # Counted even when the loop stopped part-way (a bad item): the keys before it are in the
            # slots, and a put reusing their entry numbers would cut the chains through them.
            self.hash_slot_count = slots
            self.end_timestamp = store_timestamp
            self.end_phy_offset = physical_offset
            self.index_count = number
        if len(tail) >= self._tail_limit:
            try:
                self._write_tail()
                self._tail_limit = _TAIL_BYTES
            except OSError as exc:  # a full disk: the keys stay in memory, findable; tried again later
                self._tail_limit = len(tail) + _TAIL_BYTES
                logger.warning(
                    "index %s: %d entries not written yet: %s",
                    self.file.path.name,
                    len(tail) // _ENTRY_SIZE,
                    exc,
                )
        if error is not None:
            raise error
        return end - start

    def _write_tail(self) -> None:
        """Write the entries kept in memory to the file (the caller holds the lock)."""
        tail, first = self._tail
        if tail:
            self.file.write(self._entries_at + first * _ENTRY_SIZE, tail)
            self._tail = (bytearray(), first + len(tail) // _ENTRY_SIZE)

    def write_entries(self) -> None:
        """Write every entry added so far to the file (a reader of the file's entries calls it first)."""
        with self._lock:
            self._write_tail()

    def _open_slots(self) -> bytearray:
        """Read the hash slots into memory for writing; the next entry is numbered past every slot
        (one copied by a flush may be newer than the header: see the module docstring)."""
        size = self.slot_num * _SLOT_SIZE
        if self.index_count <= 1 and self.hash_slot_count == 0:  # a new file: nothing to read
            table, newest = bytearray(size), 0
        else:
            table = bytearray(os.pread(self.file.fd, size, _SLOTS_AT))
            table += bytes(size - len(table))
            if compiled_index_newest_slot is not None:
                newest = compiled_index_newest_slot(table)
            else:
                heads = array.array("i", table)
                if sys.byteorder == "little":
                    heads.byteswap()
                newest = max(heads, default=0)
        if self.index_count <= newest <= self.max_num:
            self.index_count = newest + 1
        self._changed = bytearray(-(-len(table) // _PAGE))
        self._tail = (bytearray(), self.index_count)
        self.slot_table = table
        return table

    def _put_keys_python(
        self,
        table: bytearray,
        tail: bytearray,
        items: Sequence[tuple[str, int]],
        start: int,
        end: int,
        number: int,
        slots: int,
        diff: int,
    ) -> tuple[int, int, int, Exception | None]:
        """The loop of :meth:`put_keys`: (next entry number, slots in use, last physical offset, the
        error that stopped it or None: the keys before it are in the table and must be counted)."""
        slot_num, changed = self.slot_num, self._changed
        unpack_slot, pack_slot, pack_entry = _SLOT.unpack_from, _SLOT.pack_into, INDEX_ENTRY.pack
        crc32 = zlib.crc32
        physical_offset = self.end_phy_offset
        try:
            for i in range(start, end):
                key, offset = items[i]
                # key_hash, inlined (this runs for every key of every message); select() finds
                # nothing if the two ever differ, which the index tests would catch
                h = crc32(key.encode()) & 0x7FFFFFFF
                slot_pos = (h % slot_num) * _SLOT_SIZE
                (head,) = unpack_slot(table, slot_pos)
                fresh = head <= 0 or head >= number
                tail += pack_entry(h, offset, diff, 0 if fresh else head)
                slots += fresh
                pack_slot(table, slot_pos, number)
                changed[slot_pos // _PAGE] = 1
                number += 1
                physical_offset = offset
        except Exception as exc:  # noqa: BLE001 - handed to put_keys, which raises it
            return number, slots, physical_offset, exc
        return number, slots, physical_offset, None

    def select(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Candidate physical offsets for ``key`` stored within [begin_ms, end_ms], newest first."""
        result: list[int] = []
        if self.index_count <= 1:
            return result
        if self.damaged:  # the times are not to be trusted: the caller checks each record's
            begin_ms, end_ms = -(1 << 63), 1 << 63
        elif end_ms < self.begin_timestamp or begin_ms > self.end_timestamp:
            return result
        mm = self.file.mm
        table = self.slot_table
        h = key_hash(key)
        try:
            slot_pos = (h % self.slot_num) * _SLOT_SIZE
            if table is not None:
                (number,) = _SLOT.unpack_from(table, slot_pos)
            else:
                (number,) = _SLOT.unpack_from(mm, _SLOTS_AT + slot_pos)
            # After the head: an entry the head (or its chain) names is in this tail or in the file.
            tail, first = self._tail
            in_tail = len(tail) // _ENTRY_SIZE
            limit = self.index_count
            while 0 < number < limit and len(result) < max_num:
                if 0 <= number - first < in_tail:
                    ehash, phy, diff, prev = INDEX_ENTRY.unpack_from(tail, (number - first) * _ENTRY_SIZE)
                else:
                    ehash, phy, diff, prev = INDEX_ENTRY.unpack_from(
                        mm, self._entries_at + number * _ENTRY_SIZE
                    )
                ts = self.begin_timestamp + diff * 1000
                # TIME DIFF is in whole seconds: widen the window by one second on each side
                if ehash == h and begin_ms - 1000 <= ts <= end_ms + 1000:
                    result.append(phy)
                if ts < begin_ms - 1000 or prev >= number:
                    break
                number = prev
        except ValueError:  # closed by retention meanwhile
            return result
        return result

    def flush(self) -> None:
        """Make every key added before the call durable: the entries in memory and the changed slot
        pages, then the header as it stood when the flush began, then an fsync. Runs beside puts (a
        checkpoint thread)."""
        table = self.slot_table
        full = self.is_full  # before the writes: a put meanwhile that filled it changed the table after
        if table is not None:
            self._write_slots(table)
        self.file.msync()
        if table is not None and full:  # no key goes in any more: lookups read the file
            self.slot_table = None

    def _write_slots(self, table: bytearray) -> None:
        with self._lock:  # a put is whole or not begun: the header below covers only entries written
            header = INDEX_HEADER.pack(
                self.begin_timestamp,
                self.end_timestamp,
                self.begin_phy_offset,
                self.end_phy_offset,
                self.hash_slot_count,
                self.index_count,
            )
            self._write_tail()
        changed = self._changed
        page = 0
        while (page := changed.find(1, page)) >= 0:
            run = page
            # Under the lock, the entries of the puts since before the slots that point at them, and
            # a copy of the slots: no slot copied names an entry not written. The copy is written
            # after the lock is let go: a put waiting meanwhile waits for one short copy, not for a
            # write (with the lock held through the writes, a put of the loop queued behind run after
            # run: bench/broker_work.py's broker_index_flush_put_wait_ms, docs/benchmarks.md).
            with self._lock:
                self._write_tail()
                while run < len(changed) and changed[run] and run - page < _PAGES_PER_WRITE:
                    changed[run] = 0
                    run += 1
                slots = table[page * _PAGE : run * _PAGE]
            self.file.write(_SLOTS_AT + page * _PAGE, slots)
            page = run
        self.file.write(0, header)

    def close(self) -> None:
        table = self.slot_table
        if table is not None and not self.file.closed:  # what a reopen reads (durable at the flush)
            self._write_slots(table)
        self.file.close()

    def destroy(self) -> None:
        self.file.destroy()
