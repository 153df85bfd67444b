"""StoreCheckpoint: how far the CommitLog and the derived files are known to be durable.

Byte layout of ``<store_dir>/checkpoint`` (44 bytes, big-endian)::

    0  8  PHYSIC MSG TIMESTAMP   int64 ms, store time of the last flushed commitlog record
    8  8  LOGICS MSG TIMESTAMP   int64 ms, same for ConsumeQueue entries
    16 8  INDEX MSG TIMESTAMP    int64 ms, same for IndexFile entries
    24 8  DISPATCH OFFSET        int64, every record below it is in ConsumeQueue and IndexFile, fsynced
    32 8  COMMITLOG FLUSHED      int64, every commitlog byte below it was fsynced
    40 4  CRC                    uint32, zlib.crc32 of bytes 0..40

Written to a temporary file, fsynced and renamed, so a reader sees the old or the new checkpoint.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import struct
import threading
import zlib
from pathlib import Path
from typing import Final

from dataplane.store.errors import CorruptRecordError

__all__ = ("CHECKPOINT", "StoreCheckpoint", "atomic_write", "fsync_dir")

logger = logging.getLogger(__name__)

CHECKPOINT: Final = struct.Struct(
    ">"
    "q"  # PHYSIC MSG TIMESTAMP
    "q"  # LOGICS MSG TIMESTAMP
    "q"  # INDEX MSG TIMESTAMP
    "q"  # DISPATCH OFFSET
    "q"  # COMMITLOG FLUSHED
)
_CRC: Final = struct.Struct(">I")


# One writer at a time: the store's flush thread and the timer scanner both checkpoint the store,
# and two writers of the same temp file made one rename fail (FileNotFoundError).
_WRITE_LOCK = threading.Lock()


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync of the directory."""
    with _WRITE_LOCK:
        _atomic_write(path, data)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """fsync ``directory``: the entries created, renamed or removed in it are on disk."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclasses.dataclass(slots=True)
class StoreCheckpoint:
    """The checkpoint values; ``dispatch_offset`` is where recovery starts re-dispatching."""

    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    dispatch_offset: int = 0
    commit_log_flushed: int = 0

    def encode(self) -> bytes:
        body = CHECKPOINT.pack(
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.dispatch_offset,
            self.commit_log_flushed,
        )
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, data: bytes) -> StoreCheckpoint:
        if len(data) != CHECKPOINT.size + _CRC.size:
            raise CorruptRecordError(
                f"checkpoint: expected {CHECKPOINT.size + _CRC.size} bytes, found {len(data)}"
            )
        (crc,) = _CRC.unpack_from(data, CHECKPOINT.size)
        actual = zlib.crc32(data[: CHECKPOINT.size])
        if crc != actual:
            raise CorruptRecordError(f"checkpoint: expected CRC 0x{crc:08X}, found 0x{actual:08X}")
        values = CHECKPOINT.unpack_from(data, 0)
        if min(values[3:]) < 0:
            raise CorruptRecordError(f"checkpoint: expected non-negative offsets, found {values[3:]}")
        return cls(*values)

    @classmethod
    def load(cls, path: Path) -> StoreCheckpoint | None:
        """The checkpoint, or None when absent or corrupt (recovery then scans everything)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return cls.decode(data)
        except CorruptRecordError:
            logger.warning("ignoring corrupt checkpoint %s", path, exc_info=True)
            return None

    def save(self, path: Path) -> None:
        atomic_write(path, self.encode())
