"""Retention: delete whole expired CommitLog segments and what points into them.

A segment other than the newest is deleted when its last write is older than
``file_reserved_time_hours``, or, oldest first, while the disk is fuller than ``disk_max_used_ratio``.
Then ConsumeQueue files and IndexFiles that only point below the new minimum go too, and every queue's
minimum offset moves forward (RocketMQ ``CleanCommitLogService`` / ``CleanConsumeQueueService``).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable

from dataplane.store.commit_log import CommitLog
from dataplane.store.config import MessageStoreConfig
from dataplane.store.consume_queue import ConsumeQueueTable
from dataplane.store.index_service import IndexService

__all__ = ("RetentionService", "disk_usage_ratio")

logger = logging.getLogger(__name__)


def disk_usage_ratio(path: str | os.PathLike[str]) -> float:
    """Used share of the space this process may use, as ``df`` computes Use% (reserved blocks excluded)."""
    usage = shutil.disk_usage(path)
    room = usage.used + usage.free
    return usage.used / room if room else 0.0


class RetentionService:
    """Deletes expired segments; safe to run concurrently with appends and reads.

    Guarantees: never deletes the newest segment; deletes from the front only, so the CommitLog stays
    contiguous; readers of a deleted offset get "offset moved" rather than bytes of another segment.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService,
        usage: Callable[[], float],
    ):
        self.config = config
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        self.usage = usage

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """One retention pass; returns the number of CommitLog segments deleted."""
        now = time.time() if now_ms is None else now_ms / 1000
        reserved_s = self.config.file_reserved_time_hours * 3600
        deleted = 0
        queue = self.commit_log.queue
        while deleted < self.config.delete_files_batch_max and len(queue.files) > 1:
            first = queue.files[0]
            try:
                mtime = first.path.stat().st_mtime
            except FileNotFoundError:
                mtime = 0.0
            expired = mtime + reserved_s <= now
            if not expired and self.usage() <= self.config.disk_max_used_ratio:
                break
            logger.info(
                "deleting commitlog segment %s (%s)", first.path.name, "expired" if expired else "disk full"
            )
            queue.delete_first()
            deleted += 1
        if deleted:
            self.clean_derived()
        return deleted

    def clean_derived(self) -> None:
        """Drop queue and index files below the CommitLog minimum; move queue minimum offsets."""
        min_offset = self.commit_log.min_offset
        for cq in list(self.queues.queues.values()):
            with cq.lock:
                cq.delete_expired(min_offset)
        self.index.delete_expired(min_offset)
