"""Local (hot) retention when tiering is on: a segment leaves the disk only after it was offloaded.

An offloaded segment other than the newest is deleted locally once its last write is older than the
longest hot retention of the topics in it, or, oldest first, while the disk is fuller than
``disk_max_used_ratio``. A segment that is not offloaded yet is never deleted (an object-store outage
makes the disk fill instead of leaving a hole in the log), except one that already expired from the
tier. Queue and index files pointing below the new minimum go as in :class:`RetentionService`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from dataplane.store.retention import RetentionService

if TYPE_CHECKING:
    from dataplane.store.tiered.store import TieredMessageStore

__all__ = ("TieredRetentionService",)

logger = logging.getLogger(__name__)


class TieredRetentionService(RetentionService):
    """Deletes offloaded segments past hot retention; same guarantees as :class:`RetentionService`."""

    tiered_store: TieredMessageStore

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        store = self.tiered_store
        if not store.manifest_loaded:
            return 0
        now = time.time() if now_ms is None else now_ms / 1000
        deleted = 0
        queue = self.commit_log.queue
        while deleted < self.config.delete_files_batch_max and len(queue.files) > 1:
            first = queue.files[0]
            view = store.view
            seg = view.segment_for(first.file_from_offset)
            below_tier = bool(view.segments) and first.file_from_offset + first.file_size <= view.min_offset
            if seg is None and not below_tier:
                break  # not offloaded yet: keep it, whatever the disk says
            if seg is not None:
                hot_ms = max(
                    (store.hot_retention_ms(topic) for topic in seg.topic_bytes),
                    default=store.hot_retention_ms(""),
                )
            else:
                hot_ms = 0
            try:
                mtime = first.path.stat().st_mtime
            except FileNotFoundError:
                mtime = 0.0
            expired = mtime + hot_ms / 1000 <= now
            if not expired and self.usage() <= self.config.disk_max_used_ratio:
                break
            logger.info(
                "deleting offloaded commitlog segment %s (%s)",
                first.path.name,
                "hot retention" if expired else "disk full",
            )
            queue.delete_first()
            deleted += 1
        if deleted:
            self.clean_derived()
        return deleted
