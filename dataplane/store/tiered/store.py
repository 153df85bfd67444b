"""TieredMessageStore: the MessageStore with sealed segments offloaded and cold reads from the tier.

Reads by queue offset, time, key and message id look at local data first and at the object store
for what is only there, so a consumer sees one log from the oldest tiered message to the newest local
one. Per-topic retention: hot (local) and tiered hours come from :meth:`set_tier_hooks`; a topic's
tiered messages expire logically (they are no longer served) once the newest message of their segment
is older than hot + tiered, and the objects go when every topic in the segment has expired.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from dataplane.store.config import MessageStoreConfig
from dataplane.store.errors import OffsetMovedError, StoreError
from dataplane.store.message import GetResult, StoredMessage
from dataplane.store.message_store import MessageStore
from dataplane.store.record import decode_message_id
from dataplane.store.service import PeriodicService
from dataplane.store.status import GetMessageStatus
from dataplane.store.tiered.block_cache import BlockCache
from dataplane.store.tiered.cold_reader import ColdReader
from dataplane.store.tiered.config import TierConfig
from dataplane.store.tiered.manifest import ManifestStore, ManifestView, OffloadManifest
from dataplane.store.tiered.object_store import ObjectStore, open_object_store
from dataplane.store.tiered.offload import OffloadService
from dataplane.store.tiered.retention import TieredRetentionService
from dataplane.store.tiered.status import TierStatus, tier_status
from dataplane.store.tiered.uploader import UploadWorker

__all__ = ("TieredMessageStore",)

logger = logging.getLogger(__name__)

_HOUR_MS = 3_600_000
_FAR_FUTURE_MS = 1 << 62


class TieredMessageStore(MessageStore):
    """A :class:`MessageStore` whose sealed segments also live in an object store.

    Guarantees: a segment is deleted locally only after its objects were verified and listed in the
    manifest; reads of offloaded offsets return the same records as local reads did.
    """

    def __init__(self, config: MessageStoreConfig, tier: TierConfig, objects: ObjectStore | None = None):
        super().__init__(config)
        self.tier_config = tier
        self.objects = objects if objects is not None else open_object_store(tier.object_store)
        self.manifests = ManifestStore(self.objects, config.store_dir / "tiered" / "manifest.json")
        self.manifest = OffloadManifest(segment_size=config.mapped_file_size_commit_log)
        self.view = ManifestView(self.manifest)
        self.manifest_loaded = False
        self.cache = BlockCache(
            self.objects,
            tier.block_bytes,
            tier.cache_bytes,
            tier.prefetch_blocks,
            readahead_max_bytes=tier.readahead_max_bytes,
        )
        self.cold = ColdReader(self.cache, self.commit_log.msg_id_prefix, self.view)
        retention = TieredRetentionService(
            config, self.commit_log, self.consume_queues, self.index, self.disk_usage_ratio
        )
        retention.tiered_store = self
        self.retention = retention
        self.offloader = OffloadService(self)
        # segments go up from a child process, unless the caller hands in its own object store
        # (tests wrap one to inject failures), which only this process can call
        self.upload_worker = (
            UploadWorker(tier.object_store) if objects is None and tier.upload_process else None
        )
        self._confirmed_offset: Callable[[], int] | None = None
        self._is_master: Callable[[], bool] | None = None
        self._retention: Callable[[str], tuple[float, float]] | None = None

    #
    # Hooks: HA provides the confirmed offset and the role; the broker the per-topic retention.
    #

    def set_tier_hooks(
        self,
        *,
        confirmed_offset: Callable[[], int] | None = None,
        is_master: Callable[[], bool] | None = None,
        retention: Callable[[str], tuple[float, float]] | None = None,
    ) -> None:
        """``confirmed_offset()``: CommitLog offset the in-sync replicas hold (default: flushed offset);
        ``is_master()``: only the master offloads (default: True); ``retention(topic)``: (hot hours,
        tiered hours) of a topic (default: the tier config's defaults). None keeps the current hook."""
        if confirmed_offset is not None:
            self._confirmed_offset = confirmed_offset
        if is_master is not None:
            self._is_master = is_master
        if retention is not None:
            self._retention = retention

    def confirmed_offset(self) -> int:
        hook = self._confirmed_offset
        return int(hook()) if hook is not None else self.commit_log.flushed_offset

    def is_master(self) -> bool:
        hook = self._is_master
        return bool(hook()) if hook is not None else True

    def retention_hours(self, topic: str) -> tuple[float, float]:
        hook = self._retention
        if hook is not None:
            return hook(topic)
        return self.tier_config.hot_retention_hours, self.tier_config.tiered_retention_hours

    def hot_retention_ms(self, topic: str) -> int:
        return int(self.retention_hours(topic)[0] * _HOUR_MS)

    def total_retention_ms(self, topic: str) -> int:
        hot, tiered = self.retention_hours(topic)
        return int((hot + tiered) * _HOUR_MS)

    #
    # Lifecycle and manifest
    #

    def start(self) -> None:
        super().start()
        if self.upload_worker is not None:
            self.upload_worker.start()  # now, not on the first upload: its start-up costs CPU too
        self.ensure_manifest()
        service = PeriodicService("TieredOffloadService", self.tier_config.interval_ms, self._offload_pass)
        service.start()
        self._services.append(service)

    def shutdown(self) -> None:
        self.offloader.stopping = True
        try:
            super().shutdown()
        finally:
            self.cache.close()
            if self.upload_worker is not None:
                self.upload_worker.close()

    def _offload_pass(self) -> None:
        # local retention right after an offload, so a short hot retention frees the disk at once
        if self.offloader.run_once() and self.running:
            self.delete_expired_files()

    def ensure_manifest(self) -> bool:
        """Load the manifest once; False (and retried later) while neither copy can be read."""
        if self.manifest_loaded:
            return True
        try:
            manifest = self.manifests.load()
        except (StoreError, OSError) as exc:
            logger.warning("tier: manifest not loaded yet (%s); offload and local deletion wait", exc)
            return False
        size = self.config.mapped_file_size_commit_log
        if manifest.segments and manifest.segment_size != size:
            logger.error(
                "tier: manifest segments are %d bytes, this store writes %d; tiering is paused",
                manifest.segment_size,
                size,
            )
            return False
        manifest.segment_size = size
        self._install(manifest)
        self.manifest_loaded = True
        return True

    def publish_manifest(self, manifest: OffloadManifest) -> None:
        """Save ``manifest`` (object store, then local copy) and serve reads from it."""
        self._install(self.manifests.save(manifest))

    def _install(self, manifest: OffloadManifest) -> None:
        view = ManifestView(manifest)
        self.manifest = manifest
        self.view = view
        self.cold.view = view

    def tier_status(self) -> TierStatus:
        return tier_status(self)

    #
    # Reads
    #

    def _tier_range(self, topic: str, queue_id: int) -> tuple[int, int] | None:
        view = self.view
        if not view.segments:
            return None
        cutoff = int(time.time() * 1000) - self.total_retention_ms(topic)
        return view.queue_range(topic, queue_id, cutoff)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        local = super().get_min_offset_in_queue(topic, queue_id)
        tier = self._tier_range(topic, queue_id)
        return tier[0] if tier is not None and tier[0] < local else local

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
        tier = self._tier_range(topic, queue_id)
        if tier is None:
            return super().get_messages(topic, queue_id, offset, max_count, max_bytes, tag_filter, read)
        cq = self.consume_queues.find(topic, queue_id)
        local_min = cq.min_offset if cq is not None else tier[1]
        max_offset = cq.max_offset if cq is not None else tier[1]
        min_offset = min(tier[0], local_min)
        if offset >= local_min:
            result = super().get_messages(topic, queue_id, offset, max_count, max_bytes, tag_filter, read)
            if result.status is not GetMessageStatus.OFFSET_TOO_SMALL or offset >= tier[1]:
                return result._replace(min_offset=min(min_offset, result.min_offset))
            local_min = result.min_offset  # the local segment went meanwhile: it is in the tier
        if offset < min_offset:
            return GetResult(GetMessageStatus.OFFSET_TOO_SMALL, [], min_offset, min_offset, max_offset)
        if offset >= tier[1]:  # a hole between the tier and the local log: continue past it
            return GetResult(GetMessageStatus.OFFSET_FOUND_NULL, [], local_min, min_offset, max_offset)
        end = min(tier[1], max(local_min, offset + 1))
        messages, next_offset, moved = self.cold.get_messages(
            topic, queue_id, offset, end, max_count, max_bytes, tag_filter
        )
        if moved and not messages:
            new_min = self.get_min_offset_in_queue(topic, queue_id)
            if new_min > offset:
                return GetResult(GetMessageStatus.OFFSET_TOO_SMALL, [], new_min, new_min, max_offset)
        filtered = tag_filter is not None and bool(tag_filter) and "*" not in tag_filter
        return ColdReader.result(messages, next_offset, min_offset, max_offset, filtered)

    def _queue_store_time(self, topic: str, queue_id: int, offset: int, local_min: int) -> int | None:
        if offset >= local_min:
            cq = self.consume_queues.find(topic, queue_id)
            entry = cq.entry(offset) if cq is not None else None
            return self.commit_log.store_timestamp_at(entry[0]) if entry is not None and entry[1] else None
        entry = self.cold.entry(topic, queue_id, offset)
        return self.cold.store_timestamp_at(entry[0]) if entry is not None and entry[1] else None

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        tier = self._tier_range(topic, queue_id)
        if tier is None:
            return super().get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)
        cq = self.consume_queues.find(topic, queue_id)
        local_min = cq.min_offset if cq is not None else tier[1]
        lo = min(tier[0], local_min)
        hi = cq.max_offset if cq is not None else tier[1]
        while lo < hi:
            mid = (lo + hi) // 2
            ts = self._queue_store_time(topic, queue_id, mid, local_min)
            if ts is None or ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        local = super().get_store_time(topic, queue_id, offset)
        if local >= 0:
            return local
        tier = self._tier_range(topic, queue_id)
        if tier is None or not tier[0] <= offset < tier[1]:
            return -1
        try:
            ts = self._queue_store_time(topic, queue_id, offset, _FAR_FUTURE_MS)
        except StoreError:
            return -1
        return -1 if ts is None else ts

    def look_message_by_offset(self, physical_offset: int) -> StoredMessage:
        try:
            return super().look_message_by_offset(physical_offset)
        except OffsetMovedError:
            if self.view.segment_for(physical_offset) is None:
                raise
        return self.cold.read_message(physical_offset)

    def look_message_by_id(self, msg_id: str) -> StoredMessage | None:
        found = super().look_message_by_id(msg_id)
        if found is not None:
            return found
        try:
            host, phys = decode_message_id(msg_id)
        except StoreError:
            return None
        if host != self.commit_log.store_host or self.view.segment_for(phys) is None:
            return None
        try:
            return self.cold.read_message(phys)
        except StoreError:
            return None

    def _cold_verified(
        self, key: str, match: str, max_num: int, begin_ms: int, end_ms: int, *, uniq: bool, topic: str | None
    ) -> list[StoredMessage]:
        result: list[StoredMessage] = []
        for phys in self.cold.select(key, max_num, begin_ms, end_ms, self.commit_log.min_offset):
            try:
                msg = self.cold.read_message(phys)
            except StoreError:
                continue
            if not begin_ms <= msg.store_timestamp <= end_ms:
                continue
            if uniq:
                if msg.uniq_key != match:
                    continue
            elif msg.topic != topic or match not in msg.keys:
                continue
            if msg.store_timestamp < int(time.time() * 1000) - self.total_retention_ms(msg.topic):
                continue  # logically expired for its topic
            result.append(msg)
            if len(result) >= max_num:
                break
        return result

    def query_messages_by_key(
        self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int = _FAR_FUTURE_MS
    ) -> list[StoredMessage]:
        local = super().query_messages_by_key(topic, key, max_num, begin_ms, end_ms)
        if len(local) >= max_num or not self.view.segments:
            return local
        cold = self._cold_verified(
            f"{topic}#{key}", key, max_num - len(local), begin_ms, end_ms, uniq=False, topic=topic
        )
        return sorted(cold + local, key=lambda m: m.physical_offset)

    def query_messages_by_uniq_key(
        self, uniq_key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int = _FAR_FUTURE_MS
    ) -> list[StoredMessage]:
        local = super().query_messages_by_uniq_key(uniq_key, max_num, begin_ms, end_ms)
        if len(local) >= max_num or not self.view.segments:
            return local
        cold = self._cold_verified(
            "#" + uniq_key, uniq_key, max_num - len(local), begin_ms, end_ms, uniq=True, topic=None
        )
        return sorted(cold + local, key=lambda m: m.physical_offset)
