"""Cold reads: messages, ConsumeQueue entries, store times and index hits from offloaded segments.

Every read goes through the block cache (ranged GETs). Records read back are fully decoded with the
body CRC checked; a record whose PHYSICALOFFSET differs from the one asked for is corrupt. An object
deleted meanwhile by tiered retention reads as "offset moved", like a deleted local segment.
"""

from __future__ import annotations

import logging

from dataplane.store.consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE
from dataplane.store.errors import CorruptRecordError, OffsetMovedError, StoreError
from dataplane.store.index_file import key_hash
from dataplane.store.message import GetResult, StoredMessage
from dataplane.store.reader import MAX_FILTER_SCAN
from dataplane.store.record import HEADER_SIZE, decode_record, tag_hash
from dataplane.store.status import GetMessageStatus
from dataplane.store.tiered import tier_index
from dataplane.store.tiered.block_cache import BlockCache
from dataplane.store.tiered.manifest import ManifestView, TieredSegment, commitlog_key, cq_key, index_key
from dataplane.store.tiered.object_store import ObjectMissingError

__all__ = ("ColdReader",)

logger = logging.getLogger(__name__)

_STORE_TS_OFFSET = 56  # STORETIMESTAMP in record.HEADER
# A batch of cold reads fetches the bytes between its first and last record at once when they are
# this close (interleaved topics put other records in between).
_BATCH_SPAN = 4 << 20


class ColdReader:
    """Reads over the current :class:`ManifestView` (replaced whole when the manifest changes)."""

    def __init__(self, cache: BlockCache, msg_id_prefix: str, view: ManifestView) -> None:
        self.cache = cache
        self.msg_id_prefix = msg_id_prefix
        self.view = view
        self.reads = 0

    def _read(self, key: str, size: int, position: int, length: int, min_offset: int) -> bytes:
        return b"".join(view for _, view in self._read_views(key, size, position, length, min_offset))

    def _read_views(
        self, key: str, size: int, position: int, length: int, min_offset: int
    ) -> list[tuple[int, memoryview]]:
        try:
            return self.cache.read_views(key, size, position, length)
        except ObjectMissingError as exc:
            raise OffsetMovedError(f"{key} was deleted by tiered retention", min_offset) from exc

    def read_message(self, physical_offset: int, size: int = 0) -> StoredMessage:
        """The offloaded record at ``physical_offset`` (``size`` when known from a queue entry)."""
        view = self.view
        seg = view.segment_for(physical_offset)
        if seg is None:
            raise OffsetMovedError(f"physical offset {physical_offset} is not in the tier", view.min_offset)
        rel = physical_offset - seg.start
        key = commitlog_key(seg.start)
        if size <= 0:
            head = self._read(key, seg.size, rel, 4, view.min_offset)
            size = int.from_bytes(head, "big", signed=True) if len(head) == 4 else 0
            if not HEADER_SIZE <= size <= seg.size - rel:
                raise CorruptRecordError(f"tier record at {physical_offset}: bad TOTALSIZE {size}")
        data = self._read(key, seg.size, rel, size, view.min_offset)
        self.reads += 1
        msg = decode_record(data, 0, len(data), self.msg_id_prefix, True)
        if msg.physical_offset != physical_offset:
            raise CorruptRecordError(
                f"tier record at {physical_offset}: expected PHYSICALOFFSET {physical_offset}, "
                f"found {msg.physical_offset}"
            )
        return msg

    def _batch_views(self, raw: bytes, hashes: set[int] | None) -> list[tuple[int, memoryview]]:
        """One read covering the records a batch of queue entries points at (same segment, at most
        _BATCH_SPAN bytes), so a sequential reader pays one cache lookup per batch, not per record:
        views of the cached blocks, each with the physical offset of its first byte."""
        wanted = [
            (phys, size)
            for phys, size, thash in CQ_ENTRY.iter_unpack(raw)
            if size > 0 and (hashes is None or thash in hashes)
        ]
        if len(wanted) < 2:
            return []
        first, last = wanted[0][0], wanted[-1][0] + wanted[-1][1]
        seg = self.view.segment_for(first)
        if seg is None or last > seg.end or not 0 < last - first <= _BATCH_SPAN:
            return []
        cache = self.cache
        key = commitlog_key(seg.start)
        views = self._read_views(key, seg.size, first - seg.start, last - first, 0)
        if seg.end - last <= 2 * cache.window_bytes(key):
            # the next window would reach past the segment's end: continue into the next segments,
            # as many as half the cache holds, so the store always has the reader's next bytes in
            # flight and none of its time goes to waiting for a request
            after, ahead = key, seg.end
            for _ in range(cache.lookahead_objects(seg.size)):
                nxt = self.view.segment_for(ahead)
                if nxt is None:
                    break
                cache.prefetch(commitlog_key(nxt.start), nxt.size, after=after)
                cache.prefetch(cq_key(nxt.start), nxt.cq_size)
                after, ahead = commitlog_key(nxt.start), nxt.end
        return [(seg.start + at, view) for at, view in views]

    def _from_batch(
        self, views: list[tuple[int, memoryview]], physical_offset: int, size: int
    ) -> StoredMessage:
        for start, data in views:  # one to five blocks
            rel = physical_offset - start
            if rel < 0 or rel + size > len(data):
                continue
            self.reads += 1
            msg = decode_record(data, rel, rel + size, self.msg_id_prefix, True)
            if msg.physical_offset != physical_offset:
                raise CorruptRecordError(
                    f"tier record at {physical_offset}: expected PHYSICALOFFSET {physical_offset}, "
                    f"found {msg.physical_offset}"
                )
            return msg
        return self.read_message(physical_offset, size)  # not in the batch, or across two blocks

    def store_timestamp_at(self, physical_offset: int) -> int | None:
        seg = self.view.segment_for(physical_offset)
        if seg is None:
            return None
        at = physical_offset - seg.start + _STORE_TS_OFFSET
        try:
            raw = self._read(commitlog_key(seg.start), seg.size, at, 8, self.view.min_offset)
        except StoreError:
            return None
        return int.from_bytes(raw, "big", signed=True) if len(raw) == 8 else None

    def entries(self, topic: str, queue_id: int, offset: int, max_count: int) -> bytes:
        """Raw ConsumeQueue entries from ``offset``, within one segment's span (empty if none)."""
        view = self.view
        span = view.span_for(topic, queue_id, offset)
        if span is None:
            return b""
        first, count, pos, number = span
        seg = view.segments[number]
        n = min(max_count, first + count - offset)
        at = pos + (offset - first) * CQ_ENTRY_SIZE
        return self._read(cq_key(seg.start), seg.cq_size, at, n * CQ_ENTRY_SIZE, view.min_offset)

    def entry(self, topic: str, queue_id: int, offset: int) -> tuple[int, int, int] | None:
        raw = self.entries(topic, queue_id, offset, 1)
        if len(raw) != CQ_ENTRY_SIZE:
            return None
        entry: tuple[int, int, int] = CQ_ENTRY.unpack(raw)
        return entry

    def next_span_first(self, topic: str, queue_id: int, offset: int) -> int | None:
        """First queue offset of the queue's tier after ``offset`` (skips a hole), or None."""
        for first, _, _, _ in self.view.queue_spans.get((topic, queue_id), ()):
            if first > offset:
                return first
        return None

    def select(self, key: str, max_num: int, begin_ms: int, end_ms: int, below: int) -> list[int]:
        """Candidate offsets for ``key`` from segments ending at or below ``below`` (the rest is in the
        local index), newest segment first."""
        h = key_hash(key)
        result: list[int] = []
        view = self.view
        for seg in reversed(view.segments):
            if seg.end > below or seg.max_ts + 1000 < begin_ms:
                continue
            if seg.min_ts - 1000 > end_ms:
                continue
            result.extend(self._select_in(seg, h, begin_ms, end_ms))
            if len(result) >= max_num * 2:
                break
        return result

    def _select_in(self, seg: TieredSegment, h: int, begin_ms: int, end_ms: int) -> list[int]:
        key = index_key(seg.start)

        def read(position: int, length: int) -> bytes:
            return self._read(key, seg.index_size, position, length, self.view.min_offset)

        try:
            return list(reversed(tier_index.select(read, h, begin_ms, end_ms)))
        except OffsetMovedError:
            return []

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        end: int,
        max_count: int,
        max_bytes: int,
        tag_filter: set[str] | None,
    ) -> tuple[list[StoredMessage], int, bool]:
        """Messages from queue offset ``offset`` up to ``end`` (exclusive), as the local read does.

        Returns (messages, next offset, moved) where ``moved`` says an object vanished meanwhile.
        """
        if tag_filter is not None and (not tag_filter or "*" in tag_filter):
            tag_filter = None
        hashes = {tag_hash(t) for t in tag_filter} if tag_filter is not None else None
        messages: list[StoredMessage] = []
        total_bytes = 0
        next_offset = offset
        scanned = 0
        scan_limit = max_count if hashes is None else MAX_FILTER_SCAN
        done = False
        while not done and next_offset < end and scanned < scan_limit:
            want = min(scan_limit - scanned, end - next_offset, max_count if hashes is None else 1024)
            try:
                raw = self.entries(topic, queue_id, next_offset, want)
            except OffsetMovedError:
                return messages, next_offset, True
            if not raw:
                skip_to = self.next_span_first(topic, queue_id, next_offset)
                if skip_to is None or skip_to >= end:
                    return messages, next_offset, not messages
                next_offset = skip_to
                continue
            try:
                batch = self._batch_views(raw, hashes)
            except OffsetMovedError:
                return messages, next_offset, True
            for phys, size, thash in CQ_ENTRY.iter_unpack(raw):
                if size <= 0 or (hashes is not None and thash not in hashes):
                    next_offset += 1
                    scanned += 1
                    continue
                if messages and total_bytes + size > max_bytes:
                    done = True
                    break
                try:
                    msg = self._from_batch(batch, phys, size)
                except OffsetMovedError:
                    return messages, next_offset, True
                except CorruptRecordError:
                    logger.exception(
                        "%s/%d offset %d: corrupt tier record at %d", topic, queue_id, next_offset, phys
                    )
                    next_offset += 1
                    scanned += 1
                    continue
                next_offset += 1
                scanned += 1
                if tag_filter is not None and msg.properties.get("TAGS") not in tag_filter:
                    continue
                messages.append(msg)
                total_bytes += size
                if len(messages) >= max_count:
                    done = True
                    break
        return messages, next_offset, False

    @staticmethod
    def result(
        messages: list[StoredMessage], next_offset: int, min_offset: int, max_offset: int, filtered: bool
    ) -> GetResult:
        if messages:
            status = GetMessageStatus.FOUND
        elif filtered:
            status = GetMessageStatus.NO_MATCHED_MESSAGE
        else:
            status = GetMessageStatus.OFFSET_FOUND_NULL
        return GetResult(status, messages, next_offset, min_offset, max_offset)
