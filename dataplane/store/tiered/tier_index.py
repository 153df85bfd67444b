"""The tiered index object: every index key of one offloaded segment, sorted by key hash.

Byte layout (big-endian)::

    header, 16 bytes
      0  4  MAGIC          b"MQTI"
      4  4  VERSION        int32, 1
      8  4  ENTRY COUNT    int32
      12 4  BUCKET BITS    int32, b: a key hash h falls in bucket h >> (31 - b)
    fanout, (2**b + 1) x 4 bytes
      0  4  FIRST ENTRY    int32, number of the first entry of bucket i (entry count at the end)
    entries, ENTRY COUNT x 20 bytes, sorted by (KEY HASH, PHY OFFSET)
      0  4  KEY HASH       int32, crc32(key) & 0x7FFFFFFF (as the local IndexFile)
      4  8  PHY OFFSET     int64
      12 8  STORE TIME     int64 ms, whole seconds as the IndexFile keeps them

No CRC: the object is verified by MD5 when uploaded, and every hit is read back from the CommitLog
and compared (topic, key, store time) before it is returned, as for the local index.
A lookup is two ranged reads: the fanout (cached) and one bucket.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Final

from dataplane.store.errors import CorruptRecordError

__all__ = ("TIER_INDEX_ENTRY", "build_index_object", "select")

MAGIC: Final = b"MQTI"
BUCKET_BITS: Final = 12
TIER_INDEX_HEADER: Final = struct.Struct(
    ">"
    "4s"  # MAGIC
    "i"  # VERSION
    "i"  # ENTRY COUNT
    "i"  # BUCKET BITS
)
TIER_INDEX_ENTRY: Final = struct.Struct(
    ">"
    "i"  # KEY HASH
    "q"  # PHY OFFSET
    "q"  # STORE TIME
)
_FANOUT: Final = struct.Struct(">i")


def build_index_object(entries: Iterable[tuple[int, int, int]]) -> bytes:
    """The object for ``(key hash, phy offset, store time)`` entries, in any order."""
    ordered = sorted(entries)
    buckets = 1 << BUCKET_BITS
    shift = 31 - BUCKET_BITS
    fanout = [0] * (buckets + 1)
    for h, _, _ in ordered:
        fanout[(h >> shift) + 1] += 1
    for i in range(buckets):
        fanout[i + 1] += fanout[i]
    pack = TIER_INDEX_ENTRY.pack
    return b"".join(
        (
            TIER_INDEX_HEADER.pack(MAGIC, 1, len(ordered), BUCKET_BITS),
            struct.pack(f">{buckets + 1}i", *fanout),
            b"".join(pack(*e) for e in ordered),
        )
    )


def select(read: Callable[[int, int], bytes], h: int, begin_ms: int, end_ms: int) -> list[int]:
    """Candidate physical offsets for key hash ``h`` stored within [begin_ms, end_ms].

    ``read(position, length)`` reads the object (through the block cache).
    """
    magic, version, count, bits = TIER_INDEX_HEADER.unpack(read(0, TIER_INDEX_HEADER.size))
    if magic != MAGIC or version != 1 or not 0 < bits <= 20:
        raise CorruptRecordError(f"tier index: expected magic {MAGIC!r} v1, found {magic!r} v{version}")
    bucket = h >> (31 - bits)
    at = TIER_INDEX_HEADER.size + bucket * _FANOUT.size
    first, last = struct.unpack(">ii", read(at, 8))
    if not 0 <= first <= last <= count:
        raise CorruptRecordError(f"tier index: bucket {bucket} spans [{first}, {last}) of {count} entries")
    if first == last:
        return []
    entries_at = TIER_INDEX_HEADER.size + ((1 << bits) + 1) * _FANOUT.size
    raw = read(entries_at + first * TIER_INDEX_ENTRY.size, (last - first) * TIER_INDEX_ENTRY.size)
    # store times are whole seconds: widen the window by one second on each side (as IndexFile)
    return [
        phy
        for eh, phy, ts in TIER_INDEX_ENTRY.iter_unpack(raw)
        if eh == h and begin_ms - 1000 <= ts <= end_ms + 1000
    ]
