"""The tier's parts on their own: the index object, the block cache, the manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.store.errors import CorruptRecordError
from dataplane.store.index_file import key_hash
from dataplane.store.tiered.block_cache import BlockCache
from dataplane.store.tiered.manifest import ManifestStore, OffloadManifest, TieredSegment
from dataplane.store.tiered.object_store import ObjectStoreSettings, open_object_store
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
