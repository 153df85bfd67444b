"""The tier's parts on their own: the index object, the block cache, the manifest."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dataplane.store.errors import CorruptRecordError
from dataplane.store.index_file import INDEX_HEADER, IndexFile, key_hash
from dataplane.store.tiered.block_cache import BlockCache
from dataplane.store.tiered.manifest import ManifestStore, OffloadManifest, TieredSegment
from dataplane.store.tiered.object_store import ObjectStoreSettings, open_object_store
from dataplane.store.tiered.segment_objects import _index_entries
from dataplane.store.tiered.tier_index import build_index_object, select


def test_index_object_finds_every_key_in_its_time_window() -> None:
    entries = [(key_hash(f"t#k{i}"), 1000 + i * 10, 1_700_000_000_000 + i * 1000) for i in range(5000)]
    data = build_index_object(reversed(entries))

    def read(pos: int, length: int) -> bytes:
        return data[pos : pos + length]

    for h, phy, ts in entries[::97]:
        assert phy in select(read, h, ts, ts)
        assert phy not in select(read, h, ts + 10_000, ts + 20_000)
    with pytest.raises(CorruptRecordError):
        select(lambda p, n: b"\0" * n, 1, 0, 1)


def test_block_cache_is_bounded_and_shares_blocks(tmp_path: Path) -> None:
    objects = open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}"))
    blob = bytes(range(256)) * 1024  # 256 KiB
    objects.put("blob", blob)
    cache = BlockCache(objects, block_size=4096, capacity_bytes=8 * 4096, prefetch_blocks=2)
    try:
        for pos in range(0, len(blob) - 5000, 3000):
            assert cache.read("blob", len(blob), pos, 5000) == blob[pos : pos + 5000]
        assert cache.cached_bytes <= 8 * 4096
        assert cache.prefetched > 0 and cache.hits > 0
        assert cache.read("blob", len(blob), len(blob) - 10, 100) == blob[-10:]
        cache.invalidate("blob")
        assert cache.cached_bytes == 0
    finally:
        cache.close()


def test_manifest_load_takes_the_newest_copy(tmp_path: Path) -> None:
    objects = open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}/objects"))
    store = ManifestStore(objects, tmp_path / "local" / "manifest.json")
    assert store.load().segments == []
    seg = TieredSegment(0, 4096, "m", 0, "c", 0, "i", 1, 2, 3, [("t", 0, 0, 1, 0)], {"t": 10})
    saved = store.save(OffloadManifest(0, 4096, [seg]))
    assert saved.generation == 1
    # an older local copy (a crash between the two writes) loses against the object
    newer = store.save(OffloadManifest(saved.generation, 4096, []))
    (tmp_path / "local" / "manifest.json").write_bytes(saved.encode())
    assert store.load().generation == newer.generation
    # overlapping segments are refused
    bad = OffloadManifest(5, 4096, [seg, seg]).encode()
    with pytest.raises(CorruptRecordError):
        OffloadManifest.decode(bad, "test")


def _crash_with_slots_ahead(f: IndexFile) -> None:
    """What a kill right after a flush copied slots newer than its header leaves on disk."""
    assert f.slot_table is not None
    f.write_entries()  # a flush writes the entries in memory before the slots that point at them
    f.file.write(INDEX_HEADER.size, bytes(f.slot_table))
    f.file.close()


def test_segment_index_entries_after_crashes_hold_every_key_once(tmp_path: Path) -> None:
    """Recovery indexes again the keys after the header's END PHY OFFSET, behind entries with higher
    offsets (two crashes here: three ordered runs). The offload's slice of a segment's entries,
    found by binary search, still holds every key of the segment, and each once."""
    path = tmp_path / f"{0:020d}"

    def put(f: IndexFile, records: range) -> None:
        f.put_keys([(f"t#k{i}", i * 10) for i in records], 0, 1_000)

    f = IndexFile(path, 16, 1000)
    put(f, range(20))
    f.flush()
    put(f, range(20, 40))
    _crash_with_slots_ahead(f)
    f = IndexFile(path, 16, 1000)
    put(f, range(20, 60))  # recovery from record 20 on, then new puts
    f.flush()
    put(f, range(60, 70))
    _crash_with_slots_ahead(f)
    f = IndexFile(path, 16, 1000)
    put(f, range(60, 80))
    index: Any = SimpleNamespace(files=[f])
    try:
        assert f.index_count > 81  # keys indexed twice: the runs are there
        for start in range(0, 800, 30):
            for end in range(start + 10, 820, 70):
                found = [(h, phy) for h, phy, _ in _index_entries(index, start, end)]
                expected = {(key_hash(f"t#k{i}"), i * 10) for i in range(80) if start <= i * 10 < end}
                assert len(found) == len(set(found)), (start, end)
                assert set(found) == expected, (start, end)
    finally:
        f.close()
