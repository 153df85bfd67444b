"""The CommitLog: one append-only log of every message of every topic, in fixed-size segments.

Layout: ``<store_dir>/commitlog/<20-digit start offset>``, each ``mapped_file_size_commit_log`` bytes,
holding back-to-back records (``record.py``) and, when the next record does not fit, an
end-of-segment marker; unused bytes are zero. The physical offset of a record is its segment's start
offset plus its position in the segment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from dataplane.store.consume_queue import CQ_ENTRY_SIZE
from dataplane.store.errors import BodyCrcError, CorruptRecordError, OffsetMovedError, StoreError
from dataplane.store.mapped_file import MappedFile
from dataplane.store.mapped_file_queue import MappedFileQueue
from dataplane.store.message import AppendEntry, MessageToStore, StoredMessage
from dataplane.store.record import (
    END_FILE_MIN_BLANK_LENGTH,
    HEADER,
    BatchEncoding,
    DispatchRequest,
    QueueRuns,
    check_record,
    compiled_advance_queue_offsets,
    decode_record,
    encode_batch,
    host_to_bytes,
    make_message_id_prefix,
)

__all__ = ("AppendBatch", "CommitLog")

logger = logging.getLogger(__name__)

_STORE_TS_OFFSET = 56  # STORETIMESTAMP in record.HEADER


class AppendBatch:
    """Where a batch landed: an :class:`AppendEntry` per message, and what the dispatcher needs."""

    __slots__ = ("end_offset", "entries", "index_requests", "queue_runs", "store_timestamp")

    def __init__(
        self,
        entries: list[AppendEntry],
        queue_runs: QueueRuns,
        index_requests: list[tuple[str, str | None, str | None, int]],
        store_timestamp: int,
        end_offset: int,
    ):
        self.entries = entries
        self.queue_runs = queue_runs
        self.index_requests = index_requests
        self.store_timestamp = store_timestamp
        self.end_offset = end_offset


def _written_extent(mf: MappedFile) -> int:
    """Length of ``mf`` up to its last non-zero byte (read backwards in 1 MiB steps)."""
    end = mf.file_size
    step = 1 << 20
    while end > 0:
        begin = max(0, end - step)
        chunk = mf.mm[begin:end].rstrip(b"\0")
        if chunk:
            return begin + len(chunk)
        end = begin
    return 0


class CommitLog:
    """Append, read and recover the CommitLog.

    Guarantees: one writer appends at a time (callers hold the store's put lock); queue offsets are
    consecutive per (topic, queue id); a batch's first TOTALSIZE is written last, so a process killed
    mid-write leaves no record that recovery accepts.
    """

    def __init__(self, directory: Path, file_size: int, store_host: tuple[str, int], max_message_size: int):
        self.queue = MappedFileQueue(directory, file_size)
        self.file_size = file_size
        self.store_host = store_host
        self._store_host_raw = host_to_bytes(store_host)
        self.msg_id_prefix = make_message_id_prefix(store_host)
        self.max_message_size = max_message_size
        # next queue offset per (topic, queue id): RocketMQ's topicQueueTable
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self.check_crc_on_read = False
        # Filled by recover(): records whose body failed its CRC (never served), and what a
        # truncation at a damaged record threw away.
        self.corrupt_offsets: set[int] = set()
        self.truncation_reason = ""
        self.dropped_bytes = 0

    def load(self) -> None:
        self.queue.load()

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.queue.flushed_offset

    def append(self, msgs: Sequence[MessageToStore], store_timestamp: int) -> AppendBatch:
        """Append ``msgs`` in order, rolling to new segments as needed (caller holds the put lock)."""
        start = self.max_offset
        try:
            return self._append(msgs, store_timestamp)
        except (OSError, StoreError) as exc:
            # A failed write (ENOSPC, EIO), or an illegal message found after a segment roll, must not
            # leave part of the batch behind: drop every byte from the batch's start so neither
            # readers nor recovery ever see it (``_append`` gives back the queue offsets it took).
            if self.max_offset != start or not isinstance(exc, StoreError):
                try:
                    self.queue.truncate(start)
                except OSError:
                    logger.exception("could not roll back a failed append at %d", start)
            raise

    def _append(self, msgs: Sequence[MessageToStore], store_timestamp: int) -> AppendBatch:
        """Encode and write ``msgs``, rolling to the next segment(s) as often as they fill; a failure
        part-way puts every queue's next offset back where the batch found it."""
        queue = self.queue
        offsets = self.queue_offsets
        entries: list[AppendEntry] = []
        runs: QueueRuns = {}
        index: list[tuple[str, str | None, str | None, int]] = []
        consumed = 0
        try:
            while consumed < len(msgs):
                mf = queue.last_writable()
                enc = encode_batch(
                    msgs,
                    consumed,
                    mf.file_from_offset + mf.wrote_position,
                    self.file_size - mf.wrote_position,
                    store_timestamp,
                    self._store_host_raw,
                    offsets,
                    self.max_message_size,
                    self.msg_id_prefix,
                )
                self._write(mf, enc)
                if not enc.segment_full and not consumed:
                    # the whole batch in one segment (the usual case): its lists as they are
                    return AppendBatch(
                        enc.entries, enc.queue_runs, enc.index_requests, store_timestamp, self.max_offset
                    )
                entries.extend(enc.entries)
                index.extend(enc.index_requests)
                for key, (first, queue_entries) in enc.queue_runs.items():
                    run = runs.get(key)
                    if run is None:
                        runs[key] = (first, queue_entries)
                    else:
                        run[1].extend(queue_entries)  # the same queue again, in the next segment
                consumed += enc.consumed
        except BaseException:
            for key, (first, _) in runs.items():
                offsets[key] = first
            raise
        return AppendBatch(entries, runs, index, store_timestamp, self.max_offset)

    def _write(self, mf: MappedFile, enc: BatchEncoding) -> None:
        """Write one segment's part of a batch and advance the next queue offsets."""
        if enc.pieces:
            mf.write_head_last(mf.wrote_position, enc.pieces, enc.size)
        mf.wrote_position = self.file_size if enc.segment_full else mf.wrote_position + enc.size
        if compiled_advance_queue_offsets is not None:
            compiled_advance_queue_offsets(enc.queue_runs, self.queue_offsets)
            return
        offsets = self.queue_offsets
        for key, (first_offset, queue_entries) in enc.queue_runs.items():
            offsets[key] = first_offset + len(queue_entries) // CQ_ENTRY_SIZE

    def append_raw(self, physical_offset: int, data: bytes) -> None:
        """Write already-encoded, already-validated records at the current end (replication)."""
        if physical_offset != self.max_offset:
            raise StoreError(f"append_raw: expected offset {self.max_offset}, found {physical_offset}")
        view = memoryview(data)
        while view:
            mf = self.queue.last_writable(physical_offset)
            room = self.file_size - mf.wrote_position
            chunk = view[:room]
            mf.write(mf.wrote_position, chunk)
            mf.wrote_position += len(chunk)
            view = view[len(chunk) :]
        view.release()

    def _missing(self, physical_offset: int) -> StoreError:
        if physical_offset < self.min_offset:
            return OffsetMovedError(
                f"physical offset {physical_offset} was deleted; minimum is {self.min_offset}",
                self.min_offset,
            )
        return StoreError(f"physical offset {physical_offset} is past the end {self.max_offset}")

    def read_message(self, physical_offset: int) -> StoredMessage:
        """The record at ``physical_offset``; OffsetMovedError if deleted, CorruptRecordError if bad."""
        files = self.queue.files
        try:
            mf = files[(physical_offset - files[0].file_from_offset) // self.file_size]
        except IndexError:
            raise self._missing(physical_offset) from None
        if not mf.file_from_offset <= physical_offset < mf.file_from_offset + self.file_size:
            raise self._missing(physical_offset)
        try:
            msg = decode_record(
                mf.mm,
                physical_offset - mf.file_from_offset,
                mf.wrote_position,
                self.msg_id_prefix,
                self.check_crc_on_read or physical_offset in self.corrupt_offsets,
            )
        except ValueError as exc:  # mmap closed by retention after find()
            if isinstance(exc, CorruptRecordError):
                raise
            raise OffsetMovedError(f"physical offset {physical_offset} was deleted", self.min_offset) from exc
        if msg.physical_offset != physical_offset:
            raise CorruptRecordError(
                f"record at {physical_offset}: expected PHYSICALOFFSET {physical_offset}, "
                f"found {msg.physical_offset}"
            )
        return msg

    def store_timestamp_at(self, physical_offset: int) -> int | None:
        mf = self.queue.find(physical_offset)
        if mf is None:
            return None
        rel = physical_offset - mf.file_from_offset
        if rel + HEADER.size > mf.wrote_position:
            return None
        try:
            return int.from_bytes(
                mf.mm[rel + _STORE_TS_OFFSET : rel + _STORE_TS_OFFSET + 8], "big", signed=True
            )
        except ValueError:
            return None

    def read_raw(self, physical_offset: int, max_bytes: int) -> bytes:
        """Whole records from ``physical_offset``, within one segment, at most ``max_bytes`` (or one)."""
        mf = self.queue.find(physical_offset)
        if mf is None:
            if physical_offset >= self.max_offset:
                return b""
            raise self._missing(physical_offset)
        rel = physical_offset - mf.file_from_offset
        end = rel
        limit = mf.wrote_position
        while end < limit:
            try:
                res = check_record(mf.mm, end, limit)
            except CorruptRecordError:
                break
            size = res if isinstance(res, int) else res.size
            if end + size - rel > max_bytes and end > rel:
                break
            end += size
        return mf.read(rel, end - rel)

    def is_record_at(self, physical_offset: int) -> bool:
        """Whether a whole, valid record (magic, lengths, CRC) starts at ``physical_offset``."""
        mf = self.queue.find(physical_offset)
        if mf is None:
            return False
        try:
            res = check_record(mf.mm, physical_offset - mf.file_from_offset, self.file_size)
        except CorruptRecordError:  # BodyCrcError included
            return False
        return not isinstance(res, int) and res.physical_offset == physical_offset

    def recover(self, start: int, dispatch: Callable[[list[DispatchRequest]], object]) -> int:
        """Scan from ``start`` (a record boundary), validating magic, lengths and CRC, dispatching each
        valid record; truncate everything after the last valid one. Returns the new end offset."""
        queue = self.queue
        if not queue.files:
            return start
        start = max(start, queue.min_offset)
        end = start
        mf = queue.find(start)
        while mf is not None:
            pos = end - mf.file_from_offset
            limit = self.file_size
            reached_marker = False
            requests: list[DispatchRequest] = []
            while pos < limit:
                try:
                    res = check_record(mf.mm, pos, limit)
                except BodyCrcError as exc:
                    # framing intact, body damaged: keep its place, never serve it
                    res = exc.request  # type: ignore[assignment]
                    self.corrupt_offsets.add(mf.file_from_offset + pos)
                    logger.error("recovery: %s; the message is dropped, the records after it kept", exc)
                except CorruptRecordError as exc:
                    if mf.mm[pos : pos + 4] != b"\0\0\0\0":
                        self.truncation_reason = str(exc)
                        logger.warning(
                            "recovery: torn or corrupt tail at %d: %s", mf.file_from_offset + pos, exc
                        )
                    break
                if isinstance(res, int):
                    reached_marker = True
                    pos = limit
                    break
                if res.physical_offset != mf.file_from_offset + pos:
                    self.truncation_reason = (
                        f"record at {mf.file_from_offset + pos} says PHYSICALOFFSET {res.physical_offset}"
                    )
                    logger.warning("recovery: %s; truncating", self.truncation_reason)
                    break
                requests.append(res)
                pos += res.size
            dispatch(requests)
            end = mf.file_from_offset + pos
            if not reached_marker and pos < limit:
                break
            if pos + END_FILE_MIN_BLANK_LENGTH > limit and not reached_marker:
                break
            mf = queue.find(end)
        later = [f for f in queue.files if f.file_from_offset > end]
        if later and not self.truncation_reason:
            self.truncation_reason = f"{len(later)} segment(s) after a gap at {end}"
        if self.truncation_reason:
            # what the truncation throws away: written (non-zero) bytes at and after `end`
            self.dropped_bytes = sum(
                max(0, f.file_from_offset + _written_extent(f) - max(end, f.file_from_offset))
                for f in queue.files
                if f.file_from_offset + self.file_size > end
            )
        queue.truncate(end)
        queue.set_positions(end)
        return end

    def truncate(self, offset: int) -> None:
        self.queue.truncate(offset)
        self.queue.set_positions(offset)

    def flush(self) -> int:
        return self.queue.flush()

    def close(self) -> None:
        self.queue.close()
