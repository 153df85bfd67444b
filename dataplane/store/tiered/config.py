"""Configuration of the tier: where objects go, when segments are offloaded, how cold reads cache."""

from __future__ import annotations

import dataclasses

from dataplane.store.tiered.object_store import ObjectStoreSettings

__all__ = ("TierConfig",)


@dataclasses.dataclass(slots=True)
class TierConfig:
    """Offload and cold-read settings (docs/tiered-storage.md has the meaning of each)."""

    object_store: ObjectStoreSettings
    # A sealed segment is offloaded once its last write is this old, or sooner while more than
    # offload_pending_bytes of sealed segments wait.
    offload_after_ms: int = 600_000
    offload_pending_bytes: int = 2 << 30
    # Defaults for topics that have no retention of their own (system, retry and DLQ topics).
    hot_retention_hours: float = 72.0
    tiered_retention_hours: float = 720.0
    # Cold reads: aligned blocks fetched by ranged GETs, a bounded LRU of them, read-ahead depth.
    cache_bytes: int = 64 << 20
    block_bytes: int = 1 << 20
    prefetch_blocks: int = 4
    # The offloader runs this often and uploads at most this many segments per run.
    interval_ms: int = 5_000
    max_segments_per_pass: int = 8

    def __post_init__(self) -> None:
        if self.block_bytes < 4096:
            raise ValueError("tier block_bytes must be at least 4096")
        if self.cache_bytes < 2 * self.block_bytes:
            raise ValueError("tier cache_bytes must hold at least two blocks")
        if min(self.hot_retention_hours, self.tiered_retention_hours) < 0:
            raise ValueError("tier retention hours must be >= 0")
