"""What is uploaded with one sealed CommitLog segment, built from the local ConsumeQueues and index.

The ConsumeQueue object is the segment's ConsumeQueue entries (20 bytes each, ``consume_queue.py``)
of every queue, queue after queue; the manifest records each queue's first offset, count and byte
position. The index object is ``tier_index.py``. Both are sliced from the local files by binary
search (entries are ordered by CommitLog offset), so building them costs no per-record decoding.

After a crash an IndexFile's entries are two ordered runs: every key up to the newest entry a slot on
disk points at, then the keys recovery indexed again from the header's END PHY OFFSET on (index_file.py),
which repeat the first run's tail. Each run holds every key of its span, so wherever the binary search
lands, the slice holds every key of the range; the repeats are dropped (one entry per key and offset).
"""

from __future__ import annotations

import dataclasses
import struct

from dataplane.store.commit_log import CommitLog
from dataplane.store.consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueueTable
from dataplane.store.errors import StoreError
from dataplane.store.index_file import INDEX_ENTRY, INDEX_HEADER, IndexFile
from dataplane.store.index_service import IndexService
from dataplane.store.tiered.tier_index import build_index_object

__all__ = ("SegmentObjects", "build_segment_objects", "topic_bytes_between")

_SLOT_SIZE = 4
_ENTRY_PHY = struct.Struct(">q")


@dataclasses.dataclass(slots=True)
class SegmentObjects:
    """The ConsumeQueue and index objects of one segment plus the manifest facts about it."""

    cq_data: bytes
    index_data: bytes
    queues: list[tuple[str, int, int, int, int]]
    topic_bytes: dict[str, int]
    min_ts: int
    max_ts: int


def _queue_entries(cq_table: ConsumeQueueTable, start: int, end: int) -> tuple[list[bytes], SegmentObjects]:
    chunks: list[bytes] = []
    result = SegmentObjects(b"", b"", [], {}, 0, 0)
    position = 0
    for (topic, qid), cq in sorted(cq_table.queues.items()):
        lo = cq.first_offset_at_or_after(start, cq.min_offset, cq.max_offset)
        hi = cq.first_offset_at_or_after(end, lo, cq.max_offset)
        if hi <= lo:
            continue
        entry = cq.entry(lo)
        if entry is None or entry[0] < start:
            raise StoreError(f"{topic}/{qid}: ConsumeQueue entries for [{start}, {end}) are not local")
        parts = []
        offset = lo
        while offset < hi:
            raw = cq.entries(offset, hi - offset)
            if not raw:
                raise StoreError(f"{topic}/{qid}: ConsumeQueue entry {offset} vanished while offloading")
            parts.append(raw)
            offset += len(raw) // CQ_ENTRY_SIZE
        data = b"".join(parts)
        size = sum(e[1] for e in CQ_ENTRY.iter_unpack(data))
        result.topic_bytes[topic] = result.topic_bytes.get(topic, 0) + size
        result.queues.append((topic, qid, lo, hi - lo, position))
        chunks.append(data)
        position += len(data)
    return chunks, result


def _index_entries(index: IndexService, start: int, end: int) -> list[tuple[int, int, int]]:
    """(key hash, physical offset, store time) of the keys stored in [start, end), each once: a key
    indexed again after a crash has two entries, maybe in two files."""
    out: dict[tuple[int, int], tuple[int, int, int]] = {}
    for f in list(index.files):
        if f.index_count <= 1 or f.end_phy_offset < start or f.begin_phy_offset >= end:
            continue
        for entry in _file_entries(f, start, end):
            out.setdefault(entry[:2], entry)
    return list(out.values())


def _file_entries(f: IndexFile, start: int, end: int) -> list[tuple[int, int, int]]:
    f.write_entries()  # the newest entries are kept in memory until a flush
    mm = f.file.mm
    entries_at = INDEX_HEADER.size + f.slot_num * _SLOT_SIZE
    size = INDEX_ENTRY.size

    def phy(number: int) -> int:
        return int(_ENTRY_PHY.unpack_from(mm, entries_at + number * size + 4)[0])

    def first_at_or_after(offset: int, lo: int, hi: int) -> int:
        while lo < hi:
            mid = (lo + hi) // 2
            if phy(mid) < offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    count = f.index_count
    lo = first_at_or_after(start, 1, count)
    hi = first_at_or_after(end, lo, count)
    raw = mm[entries_at + lo * size : entries_at + hi * size]
    begin = f.begin_timestamp
    return [(h, p, begin + diff * 1000) for h, p, diff, _ in INDEX_ENTRY.iter_unpack(raw) if start <= p < end]


def build_segment_objects(
    commit_log: CommitLog, cq_table: ConsumeQueueTable, index: IndexService, start: int, end: int
) -> SegmentObjects:
    """Slice the ConsumeQueue and index data of the CommitLog segment [start, end)."""
    chunks, result = _queue_entries(cq_table, start, end)
    result.cq_data = b"".join(chunks)
    result.index_data = build_index_object(_index_entries(index, start, end))
    first_ts = commit_log.store_timestamp_at(start)
    result.min_ts = first_ts if first_ts is not None else 0
    last_ts = result.min_ts
    for topic, qid, lo, count, _ in result.queues:
        cq = cq_table.find(topic, qid)
        entry = cq.entry(lo + count - 1) if cq is not None else None
        if entry is not None:
            ts = commit_log.store_timestamp_at(entry[0])
            if ts is not None:
                last_ts = max(last_ts, ts)
    result.max_ts = last_ts
    return result


def topic_bytes_between(cq_table: ConsumeQueueTable, start: int, end: int) -> dict[str, int]:
    """Bytes of each topic's records in the CommitLog range [start, end), from the local queues."""
    _, result = _queue_entries(cq_table, start, end)
    return result.topic_bytes
