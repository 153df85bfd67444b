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
    # A sequential reader's read-ahead window starts at prefetch_blocks and doubles at each refill up
    # to this many bytes (one ranged GET per refill; capped at a quarter of cache_bytes).
    readahead_max_bytes: int = 16 << 20
    # The offloader runs this often and uploads at most this many segments per run.
    interval_ms: int = 5_000
    max_segments_per_pass: int = 8
    # CommitLog segments are read, hashed and uploaded by a child process (uploader.py) so that the
    # broker's write path keeps the GIL; False uploads on the offload thread. Objects larger than
    # upload_part_bytes go up as multipart uploads of parts that size (a multiple of 1 MiB).
    upload_process: bool = True
    upload_part_bytes: int = 16 << 20
    # Offload bandwidth limit in bytes/s, applied per 1 MiB read (0: unlimited).
    offload_rate_bytes: int = 0

    def __post_init__(self) -> None:
        if self.block_bytes < 4096:
            raise ValueError("tier block_bytes must be at least 4096")
        if self.cache_bytes < 2 * self.block_bytes:
            raise ValueError("tier cache_bytes must hold at least two blocks")
        if self.upload_part_bytes < 5 << 20 or self.upload_part_bytes % (1 << 20):
            raise ValueError("tier upload_part_bytes must be a multiple of 1 MiB and at least 5 MiB")
        if self.offload_rate_bytes < 0:
            raise ValueError("tier offload_rate_bytes must be >= 0")
        if min(self.hot_retention_hours, self.tiered_retention_hours) < 0:
            raise ValueError("tier retention hours must be >= 0")
