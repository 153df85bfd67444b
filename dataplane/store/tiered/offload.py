"""The offloader: uploads sealed CommitLog segments (with their queue and index data), verifies them,
records them in the manifest, and deletes objects past tiered retention.

One pass (every ``interval_ms``, on its own thread):

1. load the manifest if that has not succeeded yet (nothing happens without it);
2. only on the master: take the sealed segments after the manifest's end that lie below the
   confirmed offset, oldest first, when the oldest is ``offload_after_ms`` old or more than
   ``offload_pending_bytes`` wait; for each: build the ConsumeQueue and index objects and PUT them,
   have the upload process (``uploader.py``) read, hash, upload and verify the segment file, verify
   size + MD5 of each object (from the S3 ETag, single or multipart, else by reading it back), then
   save the manifest with the segment added. A crash or an error before that save leaves the
   manifest as it was: the segment is uploaded again next time (overwriting any partial objects);
3. drop segments from the front of the manifest whose every topic is past hot + tiered retention:
   save the manifest first, then delete the objects (so no listed segment lacks its bytes).

Errors (object store unreachable, verification failed) are counted, logged once per pass, and the
pass is retried at the next interval; the local segments stay until they are offloaded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from typing import TYPE_CHECKING

from dataplane.store.errors import StoreError
from dataplane.store.mapped_file import MappedFile
from dataplane.store.tiered.manifest import (
    OffloadManifest,
    TieredSegment,
    commitlog_key,
    cq_key,
    index_key,
)
from dataplane.store.tiered.object_store import ObjectStoreUnavailableError, object_md5
from dataplane.store.tiered.segment_objects import build_segment_objects
from dataplane.store.tiered.uploader import Pacer, TierVerifyError, upload_file

if TYPE_CHECKING:
    from dataplane.store.tiered.store import TieredMessageStore

__all__ = ("OffloadService", "OffloadStats", "TierVerifyError", "with_segments")

logger = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class OffloadStats:
    segments_offloaded: int = 0
    bytes_offloaded: int = 0
    segments_expired: int = 0
    failures: int = 0
    last_error: str = ""
    last_error_ms: int = 0
    last_success_ms: int = 0


class OffloadService:
    """Runs offload passes for one :class:`TieredMessageStore`; one pass at a time."""

    def __init__(self, store: TieredMessageStore) -> None:
        self.store = store
        self.stats = OffloadStats()
        self._pass_lock = threading.Lock()
        self._pacer = Pacer()  # used when uploading on this thread (no upload process)
        self.stopping = False

    def run_once(self, now_ms: int | None = None) -> int:
        """One pass; returns the number of segments offloaded. Never raises for store outages."""
        with self._pass_lock:
            try:
                if not self.store.ensure_manifest():
                    return 0
                count = self._offload_pending(now_ms)
                self._expire(now_ms)
            except (StoreError, OSError) as exc:
                self.stats.failures += 1
                self.stats.last_error = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
                self.stats.last_error_ms = int(time.time() * 1000)
                logger.warning("tier: offload pass failed, will retry: %s", self.stats.last_error)
                return 0
            return count

    def pending(self, now_ms: int | None = None) -> list[MappedFile]:
        """Sealed, confirmed segments not yet offloaded, oldest first."""
        store = self.store
        manifest = store.manifest
        files = list(store.commit_log.queue.files)
        confirmed = store.confirmed_offset()
        start = max(manifest.end_offset, store.commit_log.min_offset)
        return [
            mf
            for mf in files[:-1]
            if mf.file_from_offset >= start and mf.is_full and mf.file_from_offset + mf.file_size <= confirmed
        ]

    def _offload_pending(self, now_ms: int | None) -> int:
        store = self.store
        if not store.is_master():
            return 0
        pending = self.pending()
        if not pending:
            return 0
        config = store.tier_config
        now = time.time() if now_ms is None else now_ms / 1000
        waiting = sum(mf.file_size for mf in pending)
        count = 0
        for mf in pending[: config.max_segments_per_pass]:
            try:
                age_ms = (now - mf.path.stat().st_mtime) * 1000
            except FileNotFoundError:
                break
            if age_ms < config.offload_after_ms and waiting <= config.offload_pending_bytes:
                break
            if self.stopping:
                break
            self._offload(mf)
            waiting -= mf.file_size
            count += 1
        return count

    def _upload(self, key: str, data: bytes | memoryview, md5: str) -> None:
        objects = self.store.objects
        size = len(data)
        objects.put(key, data)
        info = objects.head(key)
        if info.size != size:
            raise TierVerifyError(f"{key}: expected {size} bytes in the object store, found {info.size}")
        if info.etag.lower() == md5:
            return
        # multipart uploads and non-S3 stores do not answer the MD5 as ETag: read the object back
        actual = object_md5(objects, key, size)
        if actual != md5:
            raise TierVerifyError(f"{key}: expected MD5 {md5}, found {actual} after upload")

    def _upload_segment(self, mf: MappedFile) -> str:
        """Upload and verify the CommitLog object of ``mf`` (sealed: its file no longer changes)."""
        store = self.store
        config = store.tier_config
        key = commitlog_key(mf.file_from_offset)
        if mf.closed:
            raise StoreError(f"segment {mf.file_from_offset} closed while offloading")
        worker = store.upload_worker
        if worker is not None:
            return worker.upload(
                key,
                mf.path,
                mf.file_size,
                config.upload_part_bytes,
                config.offload_rate_bytes,
                lambda: self.stopping,
            )
        self._pacer.rate = config.offload_rate_bytes
        return upload_file(store.objects, key, mf.path, mf.file_size, config.upload_part_bytes, self._pacer)

    def _offload(self, mf: MappedFile) -> None:
        store = self.store
        start = mf.file_from_offset
        end = start + mf.file_size
        began = time.monotonic()
        objs = build_segment_objects(store.commit_log, store.consume_queues, store.index, start, end)
        cq_md5 = hashlib.md5(objs.cq_data, usedforsecurity=False).hexdigest()
        index_md5 = hashlib.md5(objs.index_data, usedforsecurity=False).hexdigest()
        # queue and index data first: a segment is findable only once all three are verified
        self._upload(cq_key(start), objs.cq_data, cq_md5)
        self._upload(index_key(start), objs.index_data, index_md5)
        md5 = self._upload_segment(mf)
        seg = TieredSegment(
            start=start,
            size=mf.file_size,
            md5=md5,
            cq_size=len(objs.cq_data),
            cq_md5=cq_md5,
            index_size=len(objs.index_data),
            index_md5=index_md5,
            min_ts=objs.min_ts,
            max_ts=objs.max_ts,
            offloaded_ms=int(time.time() * 1000),
            queues=objs.queues,
            topic_bytes=objs.topic_bytes,
        )
        manifest = store.manifest
        store.publish_manifest(
            with_segments(manifest, [*manifest.segments, seg]),
        )
        self.stats.segments_offloaded += 1
        self.stats.bytes_offloaded += seg.stored_bytes
        self.stats.last_success_ms = seg.offloaded_ms
        logger.info(
            "tier: offloaded segment %d (%d bytes, %d queues) in %.2fs",
            start,
            seg.stored_bytes,
            len(seg.queues),
            time.monotonic() - began,
        )

    def _expire(self, now_ms: int | None) -> None:
        store = self.store
        now = int(time.time() * 1000) if now_ms is None else now_ms
        manifest = store.manifest
        expired: list[TieredSegment] = []
        for seg in manifest.segments:
            keep_ms = max(
                (store.total_retention_ms(topic) for topic in seg.topic_bytes),
                default=store.total_retention_ms(""),
            )
            if seg.max_ts + keep_ms > now:
                break
            expired.append(seg)
        if not expired:
            return
        store.publish_manifest(with_segments(manifest, manifest.segments[len(expired) :]))
        for seg in expired:
            for key in (commitlog_key(seg.start), cq_key(seg.start), index_key(seg.start)):
                try:
                    store.objects.delete(key)
                except ObjectStoreUnavailableError:
                    logger.warning("tier: could not delete %s; it stays as an orphan", key)
                store.cache.invalidate(key)
            self.stats.segments_expired += 1
            logger.info("tier: segment %d expired from the object store", seg.start)


def with_segments(manifest: OffloadManifest, segments: list[TieredSegment]) -> OffloadManifest:
    """A copy of ``manifest`` holding ``segments`` (the generation is bumped when saved)."""
    return dataclasses.replace(manifest, segments=segments)
