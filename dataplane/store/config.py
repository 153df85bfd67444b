"""Configuration of one message store (names follow RocketMQ's ``MessageStoreConfig``)."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path

__all__ = ("FlushDiskType", "MessageStoreConfig")


class FlushDiskType(enum.StrEnum):
    """When a put is acknowledged: after fsync (SYNC_FLUSH) or once in the page cache (ASYNC_FLUSH)."""

    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


@dataclasses.dataclass(slots=True)
class MessageStoreConfig:
    """Everything a :class:`MessageStore` needs; every size is configurable down to KiBs for tests."""

    store_dir: Path
    mapped_file_size_commit_log: int = 1 << 30
    consume_queue_entries_per_file: int = 300_000
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_ms: int = 500
    sync_flush_timeout_ms: int = 5000
    file_reserved_time_hours: float = 72
    disk_max_used_ratio: float = 0.75
    # Puts are refused (DISK_FULL) while the store's file system is fuller than this ratio or has
    # less than disk_min_free_bytes free (RocketMQ's diskSpaceWarningLevelRatio). The free margin
    # keeps room for the sparse IndexFile and new ConsumeQueue files, whose writes go through mmap
    # and would fault (SIGBUS) rather than fail cleanly on a full disk.
    disk_full_ratio: float = 0.95
    disk_min_free_bytes: int = 64 << 20
    store_host: tuple[str, int] = ("127.0.0.1", 10911)
    # ASYNC_FLUSH also flushes as soon as this many 4 KiB pages are dirty (RocketMQ flushLeastPages).
    # 64 MiB: under a heavy append (~2 GB/s) a flush every ~30 ms, not ~450 fdatasyncs (journal
    # commits, GIL hand-offs with the flusher thread) a second as with 4 MiB: the append rate rose
    # ~12% side by side (docs/benchmarks.md); flush_interval_ms still bounds how old an unflushed
    # write gets.
    flush_least_pages: int = 16384
    # ConsumeQueue pages are flushed, and a checkpoint written, this often.
    flush_consume_queue_interval_ms: int = 1000
    # IndexFile slot pages are flushed this often (and at shutdown). Slots are random, so under load
    # nearly every slot page changes between two flushes (20 MB with the default slot count): flushed
    # with the ConsumeQueues every second it was a large share of the broker's I/O and CPU.
    # Recovery after a crash re-dispatches from the last index flush, so this bounds how much log a
    # crash makes it re-read (RocketMQ flushes an IndexFile only when it is full).
    flush_index_interval_ms: int = 5000
    max_message_size: int = 4 << 20
    max_properties_size: int = 32767
    index_hash_slot_num: int = 5_000_000
    index_max_num: int = 20_000_000
    # Retention runs this often; deletes at most this many segments per run (bounded I/O bursts).
    clean_interval_ms: int = 10_000
    delete_files_batch_max: int = 10
    # Consumer offsets are persisted this often (and at shutdown).
    flush_consumer_offset_interval_ms: int = 5000
    # Check the CRC of every record read (RocketMQ checkCRCOnRecover applies to recovery only).
    check_crc_on_read: bool = False
    # Start-up re-verifies (CRC) at least this many bytes before the checkpoint, from a record a
    # ConsumeQueue points at (from a segment start when none is found), so a bit flip or truncation
    # there is found (RocketMQ checks the last three files); -1 verifies the whole CommitLog.
    recovery_verify_bytes: int = 256 << 20

    def __post_init__(self) -> None:
        self.store_dir = Path(self.store_dir)
        self.flush_disk_type = FlushDiskType(self.flush_disk_type)
        if self.mapped_file_size_commit_log < 4096:
            raise ValueError("mapped_file_size_commit_log must be at least 4096 bytes")
        if not 0 < self.disk_full_ratio <= 1:
            raise ValueError("disk_full_ratio must be in (0, 1]")
        if self.consume_queue_entries_per_file < 1:
            raise ValueError("consume_queue_entries_per_file must be positive")
        if self.max_message_size > self.mapped_file_size_commit_log - 8:
            self.max_message_size = self.mapped_file_size_commit_log - 8
