"""ConsumeQueue: per (topic, queue id), fixed-size entries pointing into the CommitLog.

Byte layout of one entry (20 bytes, big-endian)::

    0  8  COMMITLOG OFFSET  int64, physical offset of the record
    8  4  SIZE              int32, record size; 0 means "no entry" (never written)
    12 8  TAG HASH          int64, record.tag_hash of property TAGS (0 when untagged)

Entry ``n`` (queue offset ``n``) is at byte ``n * 20`` of the logical stream, which is split into files
of ``consume_queue_entries_per_file`` entries under ``<store_dir>/consumequeue/<topic>/<queue id>/``,
named by the 20-digit byte offset of their first entry. No CRC: the CommitLog is the source of truth
and recovery rebuilds entries from it.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from dataplane.store.errors import InvalidTopicError
from dataplane.store.mapped_file_queue import MappedFileQueue

__all__ = ("CQ_ENTRY", "CQ_ENTRY_SIZE", "ConsumeQueue", "ConsumeQueueTable", "validate_topic")

CQ_ENTRY: Final = struct.Struct(
    ">"
    "q"  # COMMITLOG OFFSET
    "i"  # SIZE
    "q"  # TAG HASH
)
CQ_ENTRY_SIZE: Final = CQ_ENTRY.size

_valid_topics: set[str] = set()


def validate_topic(topic: str) -> None:
    """Reject names that are not safe directory names: empty, ``/``, ``..``, NUL, > 255 bytes."""
    if topic in _valid_topics:
        return
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError(f"topic: expected a non-empty string, found {topic!r}")
    raw = topic.encode("utf-8", "surrogatepass")
    if len(raw) > 255:
        raise InvalidTopicError(f"topic: expected at most 255 bytes, found {len(raw)}")
    if "/" in topic or "\0" in topic or ".." in topic or topic == ".":
        raise InvalidTopicError(f"topic {topic!r}: '/', '..', '.' and NUL are not allowed")
    if len(_valid_topics) < 1_000_000:
        _valid_topics.add(topic)


class ConsumeQueue:
    """Entries of one queue: O(1) lookup by queue offset, min/max offset, lookup by store time.

    Guarantees: entries ``[min_offset, max_offset)`` are written; their commitlog offsets increase
    with the queue offset. Writes come from one dispatcher at a time (the store's put lock).
    """

    def __init__(self, directory: Path, topic: str, queue_id: int, entries_per_file: int):
        self.topic = topic
        self.queue_id = queue_id
        self.entries_per_file = entries_per_file
        # writable mapping: a batch's entries for a queue (a few hundred bytes) are copied in without a
        # system call; the disk watermark (MessageStore.disk_full) keeps a page fault from meeting ENOSPC
        self.queue = MappedFileQueue(
            directory, entries_per_file * CQ_ENTRY_SIZE, preallocate=False, writable_map=True
        )
        self.min_offset = 0
        self.max_offset = 0
        self.dirty = False
        self.lock = threading.Lock()

    def load(self) -> None:
        """Open the files; max offset is the first never-written entry of the last file."""
        queue = self.queue
        queue.load()
        if not queue.files:
            return
        self.min_offset = queue.min_offset // CQ_ENTRY_SIZE
        last = queue.files[-1]
        first_entry = last.file_from_offset // CQ_ENTRY_SIZE
        lo, hi = 0, self.entries_per_file
        while lo < hi:  # entries are written front to back: first entry whose SIZE is 0
            mid = (lo + hi) // 2
            if CQ_ENTRY.unpack_from(last.mm, mid * CQ_ENTRY_SIZE)[1] > 0:
                lo = mid + 1
            else:
                hi = mid
        self.max_offset = first_entry + lo
        queue.set_positions(self.max_offset * CQ_ENTRY_SIZE)

    def entry(self, offset: int) -> tuple[int, int, int] | None:
        """(commitlog offset, size, tag hash) of entry ``offset`` or None if outside the queue."""
        if offset < self.min_offset or offset >= self.max_offset:
            return None
        byte_offset = offset * CQ_ENTRY_SIZE
        mf = self.queue.find(byte_offset)
        if mf is None:
            return None
        try:
            entry: tuple[int, int, int] = CQ_ENTRY.unpack_from(mf.mm, byte_offset - mf.file_from_offset)
        except ValueError:  # file deleted by retention meanwhile
            return None
        return entry

    def entries(self, offset: int, max_count: int) -> bytes:
        """Raw entries from ``offset``: at most ``max_count`` and never across a file boundary."""
        end = min(self.max_offset, offset + max_count)
        if offset < self.min_offset or offset >= end:
            return b""
        byte_offset = offset * CQ_ENTRY_SIZE
        mf = self.queue.find(byte_offset)
        if mf is None:
            return b""
        rel = byte_offset - mf.file_from_offset
        count = min(end - offset, (self.queue.file_size - rel) // CQ_ENTRY_SIZE)
        try:
            return mf.read(rel, count * CQ_ENTRY_SIZE)
        except ValueError:
            return b""

    def put(self, offset: int, data: bytes | bytearray) -> int:
        """Write packed entries starting at queue offset ``offset`` (normally ``max_offset``); returns
        the new max offset."""
        if offset < self.max_offset:
            # already present (re-dispatch after recovery): skip the overlap
            skip = self.max_offset - offset
            data = data[skip * CQ_ENTRY_SIZE :]
            offset = self.max_offset
            if not data:
                return offset
        queue = self.queue
        byte_offset = offset * CQ_ENTRY_SIZE
        files = queue.files
        if files:
            # the usual case, once per queue per batch: the entries fit in the last file
            mf = files[-1]
            rel = byte_offset - mf.file_from_offset
            end = rel + len(data)
            if mf.wrote_position <= rel and end <= queue.file_size:
                mf.mm[rel:end] = data
                mf.wrote_position = end
                self.max_offset = max_offset = offset + len(data) // CQ_ENTRY_SIZE
                self.dirty = True
                return max_offset
        else:
            queue.create(byte_offset - byte_offset % queue.file_size)
            self.min_offset = offset
        view = memoryview(data)
        while view:
            mf = queue.last_writable()
            while mf.file_from_offset + queue.file_size <= byte_offset:
                mf.wrote_position = queue.file_size
                mf = queue.last_writable()
            rel = byte_offset - mf.file_from_offset
            chunk = view[: queue.file_size - rel]
            mf.write(rel, chunk)
            mf.wrote_position = rel + len(chunk)
            byte_offset += len(chunk)
            view = view[len(chunk) :]
        view.release()
        self.max_offset = byte_offset // CQ_ENTRY_SIZE
        self.dirty = True
        return self.max_offset

    def first_offset_at_or_after(self, physical_offset: int, lo: int, hi: int) -> int:
        """Smallest queue offset in ``[lo, hi)`` whose entry points at or after ``physical_offset``."""
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.entry(mid)
            if entry is not None and entry[1] > 0 and entry[0] < physical_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def truncate_physical(self, physical_offset: int) -> None:
        """Drop entries pointing at or after ``physical_offset`` (recovery, replica truncation).

        Damaged entries at the tail (negative offset, no size) go too: recovery writes entries again
        only past the kept ones, so a damaged entry left there would hide its record for good.
        """
        new_max = self.first_offset_at_or_after(physical_offset, self.min_offset, self.max_offset)
        while new_max > self.min_offset:
            entry = self.entry(new_max - 1)
            if entry is None or (0 <= entry[0] < physical_offset and entry[1] > 0):
                break
            new_max -= 1
        if new_max == self.max_offset:
            return
        self.queue.truncate(new_max * CQ_ENTRY_SIZE)
        self.queue.set_positions(new_max * CQ_ENTRY_SIZE)
        self.max_offset = new_max
        self.min_offset = min(self.min_offset, new_max)

    def delete_expired(self, min_physical_offset: int) -> int:
        """Delete whole files whose entries all point below ``min_physical_offset``; move min offset."""
        deleted = 0
        queue = self.queue
        while len(queue.files) > 1:
            second_first = queue.files[1].file_from_offset // CQ_ENTRY_SIZE
            last_of_first = self.entry(second_first - 1)
            if last_of_first is None or last_of_first[0] >= min_physical_offset:
                break
            queue.delete_first()
            deleted += 1
        lo = max(self.min_offset, queue.min_offset // CQ_ENTRY_SIZE)
        self.min_offset = lo
        self.min_offset = self.first_offset_at_or_after(min_physical_offset, lo, self.max_offset)
        return deleted

    def offset_by_time(self, timestamp_ms: int, store_time: Callable[[int], int | None]) -> int:
        """First queue offset whose message was stored at or after ``timestamp_ms`` (max if none)."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.entry(mid)
            ts = store_time(entry[0]) if entry is not None else None
            if ts is None or ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False
            self.queue.flush()

    def destroy(self) -> None:
        self.queue.destroy()
        self.min_offset = self.max_offset = 0

    def close(self) -> None:
        self.queue.close()


class ConsumeQueueTable:
    """Every ConsumeQueue of a store, created on first use (RocketMQ ``consumeQueueTable``)."""

    def __init__(self, root: Path, entries_per_file: int):
        self.root = root
        self.entries_per_file = entries_per_file
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.lock = threading.Lock()

    def load(self) -> None:
        if not self.root.is_dir():
            return
        for topic_dir in sorted(self.root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if qdir.is_dir() and qdir.name.isdigit():
                    cq = ConsumeQueue(qdir, topic_dir.name, int(qdir.name), self.entries_per_file)
                    cq.load()
                    self.queues[(topic_dir.name, int(qdir.name))] = cq

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            with self.lock:
                cq = self.queues.get((topic, queue_id))
                if cq is None:
                    validate_topic(topic)
                    if queue_id < 0:
                        raise InvalidTopicError(f"queue id: expected >= 0, found {queue_id}")
                    directory = self.root / topic / str(queue_id)
                    cq = ConsumeQueue(directory, topic, queue_id, self.entries_per_file)
                    self.queues[(topic, queue_id)] = cq
        return cq

    def max_offsets(self) -> dict[tuple[str, int], int]:
        return {key: cq.max_offset for key, cq in self.queues.items()}

    def flush(self) -> None:
        for cq in list(self.queues.values()):
            cq.flush()

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
