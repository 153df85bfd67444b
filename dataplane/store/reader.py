"""StoreReader: the read side of the store (by queue offset, time, key, message id, raw bytes).

Reads take no lock: ConsumeQueue entries are published only after their record is written, and a
segment deleted meanwhile turns into "offset moved" (GetMessageStatus.OFFSET_TOO_SMALL).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from dataplane.store.commit_log import CommitLog
from dataplane.store.consume_queue import CQ_ENTRY, ConsumeQueueTable
from dataplane.store.errors import CorruptRecordError, OffsetMovedError, StoreError
from dataplane.store.index_service import IndexService, uniq_index_key
from dataplane.store.message import GetResult, StoredMessage
from dataplane.store.record import compiled_read_run, decode_message_id, decode_record, tag_hash
from dataplane.store.status import GetMessageStatus

# compiled_read_run: the compiled run get_messages uses (None: the Python loop alone), patched by
# bench/broker_work.py and the tests to time and check the two against each other
__all__ = ("MAX_FILTER_SCAN", "StoreReader", "compiled_read_run")

logger = logging.getLogger(__name__)

# A filtered pull scans at most this many ConsumeQueue entries, so one call stays in the milliseconds.
MAX_FILTER_SCAN = 16_000
_FAR_FUTURE_MS = 1 << 62


class StoreReader:
    """Lock-free queries; every result is a whole, verified record or an explicit status."""

    def __init__(self, commit_log: CommitLog, queues: ConsumeQueueTable, index: IndexService):
        self.commit_log = commit_log
        self.consume_queues = queues
        self.index = index

    @property
    def max_physical_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def min_physical_offset(self) -> int:
        return self.commit_log.min_offset

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.find(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The next queue offset to be written (0 for an unknown queue)."""
        cq = self.consume_queues.find(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset stored at or after ``timestamp_ms``; the max offset when none is."""
        cq = self.consume_queues.find(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp_ms, self.commit_log.store_timestamp_at)

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store timestamp (ms) of the message at ``offset``, or -1 when there is none."""
        cq = self.consume_queues.find(topic, queue_id)
        entry = cq.entry(offset) if cq is not None else None
        if entry is None or entry[1] == 0:
            return -1
        ts = self.commit_log.store_timestamp_at(entry[0])
        return -1 if ts is None else ts

    def look_message_by_offset(self, physical_offset: int) -> StoredMessage:
        """The record at ``physical_offset``; OffsetMovedError / CorruptRecordError / StoreError otherwise."""
        return self.commit_log.read_message(physical_offset)

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        max_bytes: int = 4 << 20,
        tag_filter: set[str] | None = None,
        read: Callable[[int], StoredMessage] | None = None,
    ) -> GetResult:
        """Up to ``max_count`` messages (and ``max_bytes``, at least one) from queue offset ``offset``.

        With ``tag_filter`` the tag hash is compared before the CommitLog is read, the exact tag after.
        ``read`` replaces the CommitLog read by physical offset (records fetched from a replica).
        """
        cq = self.consume_queues.find(topic, queue_id)
        if cq is None:
            return GetResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, [], 0, 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0 or (min_offset >= max_offset and offset == max_offset):
            status = (
                GetMessageStatus.NO_MESSAGE_IN_QUEUE
                if max_offset == 0
                else GetMessageStatus.OFFSET_OVERFLOW_ONE
            )
            return GetResult(status, [], max_offset, min_offset, max_offset)
        if offset < min_offset:
            return GetResult(GetMessageStatus.OFFSET_TOO_SMALL, [], min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, [], offset, min_offset, max_offset)
        if offset > max_offset:
            return GetResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, [], max_offset, min_offset, max_offset)
        if tag_filter is not None and (not tag_filter or "*" in tag_filter):
            tag_filter = None
        hashes = {tag_hash(t) for t in tag_filter} if tag_filter is not None else None
        messages: list[StoredMessage] = []
        total_bytes = 0
        next_offset = offset
        scanned = 0
        moved = False
        # the usual run (from this node's CommitLog, with or without a tag filter) is read by
        # compiled code, which stops short at anything else for the loop below to handle
        run = compiled_read_run if read is None else None
        run_filter = () if hashes is None else (hashes, tag_filter)
        log = self.commit_log
        read = read or log.read_message
        scan_limit = max_count if hashes is None else MAX_FILTER_SCAN
        done = False
        while not done and next_offset < max_offset and scanned < scan_limit:
            raw = cq.entries(next_offset, min(scan_limit - scanned, max_count if hashes is None else 1024))
            if not raw:
                break
            if run is not None:
                taken, total_bytes = run(
                    raw,
                    log.queue.files,
                    log.file_size,
                    log.check_crc_on_read,
                    log.corrupt_offsets,
                    topic,
                    queue_id,
                    next_offset,
                    max_count,
                    max_bytes,
                    total_bytes,
                    messages,
                    StoredMessage,
                    *run_filter,
                )
                next_offset += taken
                scanned += taken
                if len(messages) >= max_count:
                    break
                raw = raw[taken * CQ_ENTRY.size :]
            for phys, size, thash in CQ_ENTRY.iter_unpack(raw):
                if size <= 0 or (hashes is not None and thash not in hashes):
                    next_offset += 1
                    scanned += 1
                    continue
                if messages and total_bytes + size > max_bytes:
                    done = True
                    break
                try:
                    msg = read(phys)
                except OffsetMovedError:
                    moved = True
                    next_offset += 1
                    scanned += 1
                    continue
                except StoreError:  # a corrupt record, or an entry pointing past the log's end
                    logger.exception(
                        "%s/%d offset %d: corrupt record at %d", topic, queue_id, next_offset, phys
                    )
                    next_offset += 1
                    scanned += 1
                    continue
                if msg.queue_offset != next_offset or msg.queue_id != queue_id or msg.topic != topic:
                    # a damaged entry pointing at another record: never hand out another queue's message
                    logger.error(
                        "%s/%d offset %d: entry points at %d, a record of %s/%d offset %d",
                        topic, queue_id, next_offset, phys, msg.topic, msg.queue_id, msg.queue_offset,
                    )  # fmt: skip
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
        if messages:
            status = GetMessageStatus.FOUND
        elif moved:
            new_min = cq.first_offset_at_or_after(self.commit_log.min_offset, cq.min_offset, cq.max_offset)
            return GetResult(GetMessageStatus.OFFSET_TOO_SMALL, [], new_min, new_min, max_offset)
        elif tag_filter is not None:
            status = GetMessageStatus.NO_MATCHED_MESSAGE
        else:
            status = GetMessageStatus.OFFSET_FOUND_NULL
        return GetResult(status, messages, next_offset, min_offset, max_offset)

    def decode_raw(self, raw: bytes, physical_offset: int) -> StoredMessage:
        """A whole record read elsewhere (a replica's copy of this CommitLog), CRC checked, as if
        read here at ``physical_offset``; CorruptRecordError when it is not that record."""
        msg = decode_record(raw, 0, len(raw), self.commit_log.msg_id_prefix, True)
        if msg.physical_offset != physical_offset or msg.size != len(raw):
            raise CorruptRecordError(
                f"record for {physical_offset}: found PHYSICALOFFSET {msg.physical_offset}, "
                f"{msg.size} of {len(raw)} bytes"
            )
        return msg

    def queue_entries(self, topic: str, queue_id: int, offset: int, count: int) -> list[tuple[int, int, int]]:
        """Up to ``count`` ConsumeQueue entries (physical offset, size, tag hash) from ``offset``."""
        cq = self.consume_queues.find(topic, queue_id)
        if cq is None or not cq.min_offset <= offset < cq.max_offset:
            return []
        raw = cq.entries(offset, min(count, cq.max_offset - offset))
        return [(int(p), int(n), int(h)) for p, n, h in CQ_ENTRY.iter_unpack(raw) if n > 0]

    def _verified(
        self,
        candidates: list[int],
        match: str,
        max_num: int,
        begin_ms: int,
        end_ms: int,
        *,
        uniq: bool,
        topic: str | None = None,
    ) -> list[StoredMessage]:
        result: list[StoredMessage] = []
        low, high = self.commit_log.min_offset, self.commit_log.max_offset
        for phys in candidates:
            if not low <= phys < high:
                continue
            try:
                msg = self.commit_log.read_message(phys)
            except StoreError:
                continue  # stale entry (deleted or truncated segment): never returned
            if not begin_ms <= msg.store_timestamp <= end_ms:
                continue
            if uniq:
                if msg.uniq_key != match:
                    continue
            elif msg.topic != topic or match not in msg.keys:
                continue
            result.append(msg)
            if len(result) >= max_num:
                break
        result.sort(key=lambda m: m.physical_offset)
        return result

    def query_messages_by_key(
        self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int = _FAR_FUTURE_MS
    ) -> list[StoredMessage]:
        """Messages of ``topic`` whose KEYS contain ``key``, stored in [begin_ms, end_ms]."""
        candidates = self.index.select(f"{topic}#{key}", max_num, begin_ms, end_ms)
        return self._verified(candidates, key, max_num, begin_ms, end_ms, uniq=False, topic=topic)

    def query_messages_by_uniq_key(
        self, uniq_key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int = _FAR_FUTURE_MS
    ) -> list[StoredMessage]:
        """Messages whose client message id (UNIQ_KEY) is ``uniq_key`` (several if the client resent)."""
        candidates = self.index.select(uniq_index_key(uniq_key), max_num, begin_ms, end_ms)
        return self._verified(candidates, uniq_key, max_num, begin_ms, end_ms, uniq=True)

    def look_message_by_id(self, msg_id: str) -> StoredMessage | None:
        """By offset message id (store host + physical offset), else by the client's UNIQ_KEY."""
        try:
            host, phys = decode_message_id(msg_id)
        except StoreError:
            host, phys = ("", 0), -1
        if host == self.commit_log.store_host and phys >= 0:
            try:
                msg = self.commit_log.read_message(phys)
            except StoreError:
                msg = None
            if msg is not None:
                return msg
        found = self.query_messages_by_uniq_key(msg_id, 1)
        return found[0] if found else None

    def read_commit_log(self, physical_offset: int, max_bytes: int) -> bytes:
        """Raw whole records from ``physical_offset`` for replication (empty at the end)."""
        return self.commit_log.read_raw(physical_offset, max_bytes)
