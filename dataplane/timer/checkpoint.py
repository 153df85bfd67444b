"""TimerCheckpoint: how far the timer structures are durable and delivered.

Layout of ``<timer_dir>/checkpoint`` (28 bytes, big-endian)::

    0  8  DELIVERED SECOND  int64, every wheel second below it was delivered (re-put) completely
    8  8  TIMER LOG END     int64, the timer log and the wheel were fsynced with this many bytes
    16 8  QUEUE OFFSET      int64, next timer-topic ConsumeQueue offset to read into the timer log
    24 4  CRC               uint32, zlib.crc32 of bytes 0..24

Written with :func:`dataplane.store.checkpoint.atomic_write` (temp file, fsync, rename).
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from pathlib import Path
from typing import Final

from dataplane.store.checkpoint import atomic_write

__all__ = ("TimerCheckpoint",)

_BODY: Final = struct.Struct(">qqq")
_CRC: Final = struct.Struct(">I")


@dataclasses.dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    delivered_second: int
    timer_log_end: int
    queue_offset: int

    def encode(self) -> bytes:
        body = _BODY.pack(self.delivered_second, self.timer_log_end, self.queue_offset)
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, data: bytes) -> TimerCheckpoint | None:
        if len(data) != _BODY.size + _CRC.size:
            return None
        (crc,) = _CRC.unpack_from(data, _BODY.size)
        if crc != zlib.crc32(data[: _BODY.size]):
            return None
        return cls(*_BODY.unpack_from(data))

    @classmethod
    def load(cls, path: Path) -> TimerCheckpoint | None:
        try:
            return cls.decode(path.read_bytes())
        except FileNotFoundError:
            return None

    def save(self, path: Path) -> None:
        atomic_write(path, self.encode())
