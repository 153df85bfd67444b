"""A snapshot of the tier for metrics and the admin API: bytes local vs tiered, lag, cache hit rate."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING

from dataplane.store.tiered.segment_objects import topic_bytes_between

if TYPE_CHECKING:
    from dataplane.store.tiered.store import TieredMessageStore

__all__ = ("TierStatus", "TopicTierBytes", "tier_status")

# Per-topic local bytes need a pass over the local ConsumeQueues: computed at most this often.
_TOPIC_BYTES_TTL_S = 5.0


@dataclasses.dataclass(frozen=True, slots=True)
class TopicTierBytes:
    topic: str
    local_bytes: int
    tiered_bytes: int


@dataclasses.dataclass(frozen=True, slots=True)
class TierStatus:
    """What ``mqctl admin tier status`` shows and the Prometheus collector exports."""

    url: str
    manifest_loaded: bool
    is_master: bool
    manifest_generation: int
    tiered_segments: int
    tiered_bytes: int
    tiered_min_offset: int
    tiered_end_offset: int
    local_segments: int
    local_bytes: int
    local_min_offset: int
    max_offset: int
    confirmed_offset: int
    offload_lag_bytes: int
    offload_lag_seconds: float
    segments_offloaded: int
    segments_expired: int
    offload_failures: int
    last_error: str
    last_error_ms: int
    last_success_ms: int
    cache_hits: int
    cache_misses: int
    cache_bytes: int
    cache_capacity_bytes: int
    prefetched_blocks: int
    topics: tuple[TopicTierBytes, ...]

    @property
    def cache_hit_rate(self) -> float:
        total = self.cache_hits + self.cache_misses
        return self.cache_hits / total if total else 0.0


_cache_lock = threading.Lock()
_sealed_bytes: dict[tuple[int, int], dict[str, int]] = {}
_topics_cache: dict[int, tuple[float, dict[str, int]]] = {}


def _local_topic_bytes(store: TieredMessageStore) -> dict[str, int]:
    key = id(store)
    now = time.monotonic()
    with _cache_lock:
        cached = _topics_cache.get(key)
        if cached is not None and now - cached[0] < _TOPIC_BYTES_TTL_S:
            return cached[1]
    view = store.view
    totals: dict[str, int] = {}
    files = list(store.commit_log.queue.files)
    for i, mf in enumerate(files):
        start = mf.file_from_offset
        seg = view.segment_for(start)
        if seg is not None and seg.start == start:
            per_topic = seg.topic_bytes
        elif i < len(files) - 1:
            with _cache_lock:
                sealed = _sealed_bytes.get((key, start))
            if sealed is None:
                sealed = topic_bytes_between(store.consume_queues, start, start + mf.file_size)
                with _cache_lock:
                    if len(_sealed_bytes) > 10_000:
                        _sealed_bytes.clear()
                    _sealed_bytes[(key, start)] = sealed
            per_topic = sealed
        else:
            per_topic = topic_bytes_between(store.consume_queues, start, start + mf.file_size)
        for topic, size in per_topic.items():
            totals[topic] = totals.get(topic, 0) + size
    with _cache_lock:
        _topics_cache[key] = (now, totals)
    return totals


def tier_status(store: TieredMessageStore) -> TierStatus:
    """Gather the status; cheap except for the per-topic local bytes (cached for a few seconds)."""
    view = store.view
    cache = store.cache
    stats = store.offloader.stats
    files = list(store.commit_log.queue.files)
    pending = store.offloader.pending() if store.manifest_loaded else files[:-1]
    now = time.time()
    lag_s = 0.0
    if pending:
        try:
            lag_s = max(0.0, now - pending[0].path.stat().st_mtime)
        except FileNotFoundError:
            lag_s = 0.0
    tiered: dict[str, int] = {}
    for seg in view.segments:
        for topic, size in seg.topic_bytes.items():
            tiered[topic] = tiered.get(topic, 0) + size
    local = _local_topic_bytes(store)
    topics = tuple(
        TopicTierBytes(t, local.get(t, 0), tiered.get(t, 0)) for t in sorted(set(local) | set(tiered))
    )
    url = store.objects.url
    return TierStatus(
        url=url.split("@")[-1] if "@" in url else url,
        manifest_loaded=store.manifest_loaded,
        is_master=store.is_master(),
        manifest_generation=store.manifest.generation,
        tiered_segments=len(view.segments),
        tiered_bytes=sum(s.stored_bytes for s in view.segments),
        tiered_min_offset=view.min_offset,
        tiered_end_offset=view.end_offset,
        local_segments=len(files),
        local_bytes=sum(mf.file_size for mf in files),
        local_min_offset=store.commit_log.min_offset,
        max_offset=store.commit_log.max_offset,
        confirmed_offset=store.confirmed_offset(),
        offload_lag_bytes=sum(mf.file_size for mf in pending),
        offload_lag_seconds=lag_s,
        segments_offloaded=stats.segments_offloaded,
        segments_expired=stats.segments_expired,
        offload_failures=stats.failures,
        last_error=stats.last_error,
        last_error_ms=stats.last_error_ms,
        last_success_ms=stats.last_success_ms,
        cache_hits=cache.hits,
        cache_misses=cache.misses,
        cache_bytes=cache.cached_bytes,
        cache_capacity_bytes=cache.capacity_blocks * cache.block_size,
        prefetched_blocks=cache.prefetched,
        topics=topics,
    )
