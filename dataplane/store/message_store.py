"""MessageStore: the facade over CommitLog, ConsumeQueue, IndexFile, flush, recovery and retention.

Files under ``store_dir`` (formats in ``docs/store-format.md``): ``commitlog/``, ``consumequeue/``,
``index/``, ``checkpoint``, ``config/consumerOffset.json``, ``abort`` (present while running, so its
presence at start means the last stop was not clean) and ``lock`` (one process per directory).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import math
import os
import threading
import time
from collections.abc import Sequence

from dataplane.store.checkpoint import StoreCheckpoint
from dataplane.store.commit_log import AppendBatch, CommitLog
from dataplane.store.config import FlushDiskType, MessageStoreConfig
from dataplane.store.consume_queue import ConsumeQueueTable
from dataplane.store.consumer_offsets import ConsumerOffsetManager
from dataplane.store.dispatch import CommitLogDispatcher, DispatchListener
from dataplane.store.errors import CorruptRecordError, StoreError, StoreLockedError
from dataplane.store.flush import FlushRealTimeService, GroupCommitService
from dataplane.store.index_service import IndexService
from dataplane.store.message import MessageToStore, PutResult
from dataplane.store.put_batcher import AsyncPutBatcher
from dataplane.store.reader import StoreReader
from dataplane.store.record import check_record
from dataplane.store.retention import RetentionService, disk_usage_ratio
from dataplane.store.service import PeriodicService
from dataplane.store.status import PutMessageStatus

__all__ = ("MessageStore",)

logger = logging.getLogger(__name__)


class MessageStore(StoreReader):
    """One broker's store. ``put_messages`` is thread-safe; reads are lock-free.

    Guarantees: when ``put_messages`` returns PUT_OK the messages are readable by queue offset and
    key, and under SYNC_FLUSH they are fsynced. Dispatch listeners run on the thread that appended
    (the caller of ``put_messages``, the event-loop thread for ``put_messages_async``, the replication
    thread for ``append_raw``); they must be quick and must not call back into ``put_*``.
    """

    def __init__(self, config: MessageStoreConfig):
        self.config = config
        root = config.store_dir
        commit_log = CommitLog(
            root / "commitlog", config.mapped_file_size_commit_log, config.store_host, config.max_message_size
        )
        commit_log.check_crc_on_read = config.check_crc_on_read
        queues = ConsumeQueueTable(root / "consumequeue", config.consume_queue_entries_per_file)
        index = IndexService(root / "index", config.index_hash_slot_num, config.index_max_num)
        super().__init__(commit_log, queues, index)
        self.dispatcher = CommitLogDispatcher(queues, index)
        self.consumer_offsets = ConsumerOffsetManager(root / "config" / "consumerOffset.json")
        self.retention = RetentionService(config, commit_log, queues, index, self.disk_usage_ratio)
        self._put_lock = threading.Lock()
        self._listeners: list[DispatchListener] = []
        self._running = False
        self._flush: GroupCommitService | FlushRealTimeService | None = None
        self._batcher: AsyncPutBatcher | None = None
        self._services: list[PeriodicService] = []
        self._lock_fd: int | None = None
        self._last_ts = 0
        self._checkpointed: tuple[int, int] = (-1, -1)
        # (dispatched offset, store time) the IndexFiles were last fsynced at, and when (monotonic)
        self._index_durable: tuple[int, int] = (-1, 0)
        self._index_flushed_at = -math.inf
        self._disk_checked_at = 0.0
        self.recovery_report: dict[str, object] = {}
        self._disk_full = False
        # False on an HA replica: local puts are refused (only append_raw writes), RocketMQ's SLAVE role.
        self.writable = True

    #
    # Lifecycle
    #

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Lock the directory, recover, and start the flush, checkpoint, retention and offset threads."""
        root = self.config.store_dir
        root.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise StoreLockedError(f"{root} is locked by another process") from exc
        clean = not (root / "abort").exists()
        self._recover(clean)
        self.consumer_offsets.load()
        (root / "abort").touch()
        config = self.config
        flushed = self.commit_log.max_offset
        if config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self._flush = GroupCommitService(self.commit_log.flush, flushed)
            self._batcher = AsyncPutBatcher(self._append, self._flush, config.sync_flush_timeout_ms / 1000)
        else:
            self._flush = FlushRealTimeService(
                self.commit_log.flush, flushed, config.flush_interval_ms, config.flush_least_pages * 4096
            )
        self._flush.start()
        self._services = [
            PeriodicService(
                "FlushConsumeQueueService", config.flush_consume_queue_interval_ms, self.checkpoint
            ),
            PeriodicService("CleanCommitLogService", config.clean_interval_ms, self.delete_expired_files),
            PeriodicService(
                "ConsumerOffsetPersistService",
                config.flush_consumer_offset_interval_ms,
                lambda: self.consumer_offsets.persist(force=False),
            ),
        ]
        for service in self._services:
            service.start()
        self._running = True
        logger.info("store %s started at offset %d (clean=%s)", root, self.commit_log.max_offset, clean)

    def _recover(self, clean: bool) -> None:
        root = self.config.store_dir
        began = time.monotonic()
        checkpoint = StoreCheckpoint.load(root / "checkpoint")
        commit_log = self.commit_log
        commit_log.load()
        self.consume_queues.load()
        self.index.load()
        start = checkpoint.dispatch_offset if checkpoint is not None else commit_log.min_offset
        start = min(max(start, commit_log.min_offset), commit_log.max_offset)
        verify = self.config.recovery_verify_bytes
        if verify:
            verify_from = commit_log.min_offset if verify < 0 else max(commit_log.min_offset, start - verify)
            # re-scan (and re-dispatch) from a record boundary: the last record at or before
            # verify_from that a ConsumeQueue points at, once checked to be one; else the start of
            # its segment (segments start on record boundaries), up to a whole segment earlier
            boundary = self._record_boundary(verify_from) if verify > 0 else None
            if boundary is None or not commit_log.is_record_at(boundary):
                boundary = verify_from - verify_from % commit_log.file_size
            start = max(min(start, boundary), commit_log.min_offset)
        for cq in self.consume_queues.queues.values():
            cq.truncate_physical(start)
            cq.delete_expired(commit_log.min_offset)
        dispatcher = self.dispatcher
        dispatcher.index_skip_below = self.index.end_phy_offset
        end = commit_log.recover(start, dispatcher.dispatch_requests)
        for cq in self.consume_queues.queues.values():
            cq.truncate_physical(end)
        dispatcher.dispatched_offset = end
        commit_log.queue_offsets = self.consume_queues.max_offsets()
        self._last_ts = dispatcher.last_store_timestamp
        if checkpoint is not None and end < checkpoint.dispatch_offset:
            lost = (
                f"the CommitLog ends at {end} but the checkpoint recorded {checkpoint.dispatch_offset} "
                "as written (a truncated file?)"
            )
            reason = commit_log.truncation_reason
            commit_log.truncation_reason = f"{reason}; {lost}" if reason else lost
            commit_log.dropped_bytes = max(commit_log.dropped_bytes, checkpoint.dispatch_offset - end)
        self.recovery_report = {
            "scanned_from": start,
            "end": end,
            "truncated_at": end if commit_log.truncation_reason else None,
            "truncation_reason": commit_log.truncation_reason,
            "dropped_bytes": commit_log.dropped_bytes,
            "corrupt_records": sorted(commit_log.corrupt_offsets),
        }
        if commit_log.truncation_reason or commit_log.corrupt_offsets:
            logger.error(
                "recovery of %s dropped data: %d bytes from offset %d (%s); %d corrupt records kept "
                "out of reach at %s; details in recovery-report.json",
                root,
                commit_log.dropped_bytes,
                end,
                commit_log.truncation_reason or "no truncation",
                len(commit_log.corrupt_offsets),
                sorted(commit_log.corrupt_offsets)[:10],
            )
            report = root / "recovery-report.json"
            report.write_text(json.dumps({**self.recovery_report, "time_ms": int(time.time() * 1000)}) + "\n")
        logger.info(
            "recovered %s: scanned [%d, %d) in %.3fs (clean=%s, checkpoint=%s)",
            root,
            start,
            end,
            time.monotonic() - began,
            clean,
            checkpoint is not None,
        )

    def _record_boundary(self, at_or_before: int) -> int | None:
        """The highest CommitLog offset at or before ``at_or_before`` that a ConsumeQueue entry points
        at (None when none does): a record boundary, unless the queue is damaged."""
        best = None
        for cq in self.consume_queues.queues.values():
            q = cq.first_offset_at_or_after(at_or_before, cq.min_offset, cq.max_offset)
            for entry in (cq.entry(q), cq.entry(q - 1)):
                if entry is not None and entry[1] > 0 and entry[0] <= at_or_before:
                    if best is None or entry[0] > best:
                        best = entry[0]
                    break
        return best

    def shutdown(self) -> None:
        """Stop accepting puts, flush everything, write the checkpoint and mark the stop clean."""
        if not self._running:
            return
        with self._put_lock:
            self._running = False
        for service in self._services:
            service.shutdown()
        if self._flush is not None:
            self._flush.shutdown()
        self.checkpoint(everything=True)
        self.consumer_offsets.persist()
        self.commit_log.close()
        self.consume_queues.close()
        self.index.close()
        root = self.config.store_dir
        try:
            (root / "abort").unlink()
        except FileNotFoundError:
            pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> MessageStore:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def checkpoint(self, *, everything: bool = False) -> None:
        """Flush ConsumeQueues and the CommitLog, the IndexFiles when due, then record how far they
        are durable.

        The IndexFiles are flushed every ``flush_index_interval_ms`` (and with ``everything``), not
        on every checkpoint: their hash slots are random, so under load nearly every slot page has
        changed at each flush and is written again (index_file.py). DISPATCH OFFSET stays what both
        hold fsynced, so recovery re-dispatches from the older of the two."""
        with self._put_lock:
            dispatched = self.dispatcher.dispatched_offset
            ts = self.dispatcher.last_store_timestamp
        now = time.monotonic()
        index_due = self._index_durable[0] < dispatched and (
            everything or now - self._index_flushed_at >= self.config.flush_index_interval_ms / 1000
        )
        if (dispatched, ts) == self._checkpointed and not index_due:
            return
        self.consume_queues.flush()
        if index_due:
            self.index.flush()
            self._index_durable = (dispatched, ts)
            self._index_flushed_at = now
        flushed = self.commit_log.flush()
        index_offset, index_ts = self._index_durable
        StoreCheckpoint(ts, ts, index_ts, min(dispatched, index_offset), max(flushed, dispatched)).save(
            self.config.store_dir / "checkpoint"
        )
        self._checkpointed = (dispatched, ts)

    #
    # Write path
    #

    def add_dispatch_listener(self, listener: DispatchListener) -> None:
        """``listener(topic, queue_id, new_max_offset)`` after each dispatch (see class docstring)."""
        self._listeners.append(listener)

    @property
    def disk_full(self) -> bool:
        """True while puts are refused for lack of disk space (re-read at most every 100 ms)."""
        now = time.monotonic()
        if now - self._disk_checked_at >= 0.1:
            self._disk_checked_at = now
            try:
                usage = os.statvfs(self.config.store_dir)
            except OSError:
                return self._disk_full
            free = usage.f_bavail * usage.f_frsize
            room = (usage.f_blocks - usage.f_bfree + usage.f_bavail) * usage.f_frsize
            used_ratio = 1 - free / room if room else 0.0
            full = free < self.config.disk_min_free_bytes or used_ratio >= self.config.disk_full_ratio
            if full != self._disk_full:
                log = logger.error if full else logger.warning
                log(
                    "disk %s: %d bytes free (%.1f%% used)",
                    "full" if full else "has room again",
                    free,
                    100 * used_ratio,
                )
            self._disk_full = full
        return self._disk_full

    def _append(self, msgs: Sequence[MessageToStore]) -> tuple[PutResult, int]:
        if not self._running or not self.writable:
            return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, []), 0
        if not msgs:
            return PutResult(PutMessageStatus.PUT_OK, []), 0
        if self.disk_full:
            return PutResult(PutMessageStatus.DISK_FULL, []), 0
        with self._put_lock:
            if not self._running:
                return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, []), 0
            # store timestamps never go backwards: offset-by-time relies on it
            ts = max(time.time_ns() // 1_000_000, self._last_ts)
            self._last_ts = ts
            try:
                batch: AppendBatch = self.commit_log.append(msgs, ts)
            except StoreError:
                logger.warning("rejected an illegal batch", exc_info=True)
                return PutResult(PutMessageStatus.MESSAGE_ILLEGAL, []), 0
            except OSError as exc:
                # CommitLog.append rolled its partial write back: nothing of the batch is stored.
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    self._disk_full, self._disk_checked_at = True, time.monotonic()
                    logger.error("commitlog write failed: disk full (%s)", exc)
                    return PutResult(PutMessageStatus.DISK_FULL, []), 0
                logger.exception("commitlog write failed")
                return PutResult(PutMessageStatus.UNKNOWN_ERROR, []), 0
            moved = self.dispatcher.dispatch_batch(batch)
        if self._listeners:
            self._notify(moved)
        return PutResult(PutMessageStatus.PUT_OK, batch.entries), batch.end_offset

    def _notify(self, moved: dict[tuple[str, int], int]) -> None:
        for (topic, queue_id), max_offset in moved.items():
            for listener in self._listeners:
                try:
                    listener(topic, queue_id, max_offset)
                except Exception:
                    logger.exception("dispatch listener failed")

    def put_messages(self, msgs: Sequence[MessageToStore]) -> PutResult:
        """Append a batch (consecutive queue offsets per queue); blocks until durable under SYNC_FLUSH."""
        result, end = self._append(msgs)
        if result.status is not PutMessageStatus.PUT_OK or not result.entries or self._flush is None:
            return result
        if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            if not self._flush.wait_flushed(end, self.config.sync_flush_timeout_ms / 1000):
                return PutResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, result.entries)
        else:
            self._flush.wake_up(end)
        return result

    async def put_messages_async(self, msgs: Sequence[MessageToStore]) -> PutResult:
        """As :meth:`put_messages`; under SYNC_FLUSH awaits the group commit without blocking the loop.

        Under SYNC_FLUSH the puts made on one loop in one iteration are appended as one batch
        (:class:`AsyncPutBatcher`), each caller still getting only its own entries.
        """
        if self._batcher is not None:
            return await self._batcher.enqueue(msgs)
        result, end = self._append(msgs)
        if result.status is PutMessageStatus.PUT_OK and result.entries and self._flush is not None:
            self._flush.wake_up(end)
        return result

    #
    # Replication (HA)
    #

    def append_raw(self, physical_offset: int, data: bytes) -> None:
        """Apply whole records read from a master's :meth:`read_commit_log` at ``physical_offset``."""
        file_size = self.config.mapped_file_size_commit_log
        rel0 = physical_offset % file_size
        if rel0 + len(data) > file_size:
            raise StoreError(f"append_raw: {len(data)} bytes at {physical_offset} cross a segment end")
        requests = []
        pos = 0
        while pos < len(data):
            res = check_record(data, pos, len(data))
            if isinstance(res, int):
                if rel0 + pos + res != file_size:
                    raise CorruptRecordError(
                        f"append_raw: end-of-segment marker at {pos} does not end the segment"
                    )
                pos += res
                continue
            if res.physical_offset != physical_offset + pos:
                raise CorruptRecordError(
                    f"append_raw: expected PHYSICALOFFSET {physical_offset + pos}, "
                    f"found {res.physical_offset}"
                )
            requests.append(res)
            pos += res.size
        with self._put_lock:
            self.commit_log.append_raw(physical_offset, data)
            moved = self.dispatcher.dispatch_requests(requests)
            self.commit_log.queue_offsets.update(moved)
            if requests:
                self._last_ts = max(self._last_ts, max(req.store_timestamp for req in requests))
            self.dispatcher.dispatched_offset = self.commit_log.max_offset
        if self._flush is not None:
            self._flush.wake_up(self.commit_log.max_offset)
        if self._listeners:
            self._notify(moved)

    def truncate_to(self, physical_offset: int) -> None:
        """Drop every record at and after ``physical_offset`` (a record boundary) and what points to it."""
        with self._put_lock:
            self.commit_log.truncate(physical_offset)
            for cq in self.consume_queues.queues.values():
                cq.truncate_physical(physical_offset)
            self.commit_log.queue_offsets = self.consume_queues.max_offsets()
            self.dispatcher.dispatched_offset = physical_offset
            self._checkpointed = (-1, -1)
            # what the index holds past the cut is gone: records written there again are not flushed
            offset, ts = self._index_durable
            self._index_durable = (min(offset, physical_offset), ts)
            if self._flush is not None:
                self._flush.reset(physical_offset)

    #
    # Retention
    #

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Delete expired segments (and what points into them); returns the segments deleted."""
        return self.retention.delete_expired_files(now_ms)

    def disk_usage_ratio(self) -> float:
        return disk_usage_ratio(self.config.store_dir)
