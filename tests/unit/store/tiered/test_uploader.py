"""Segment uploads from the child upload process, pacing by bytes, and the read-ahead window."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataplane.config import BrokerSettings
from dataplane.metadata import MetadataStore
from dataplane.store.tiered import offload
from dataplane.store.tiered.block_cache import BlockCache
from dataplane.store.tiered.manifest import commitlog_key
from dataplane.store.tiered.object_store import (
    ObjectInfo,
    ObjectStore,
    ObjectStoreSettings,
    open_object_store,
)
from dataplane.store.tiered.uploader import Pacer, upload_file
from dataplane.tier import open_tiered_store
from tests.unit.store.conftest import small_config
from tests.unit.store.tiered.conftest import TOPIC, TieredFactory, put_many


def test_segments_are_uploaded_by_the_child_process(
    make_tiered: TieredFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # given: uploading on the offload thread would fail
    def in_process(*args: object, **kwargs: object) -> str:
        raise AssertionError("the segment was uploaded by the broker process")

    monkeypatch.setattr(offload, "upload_file", in_process)
    store = make_tiered()
    worker = store.upload_worker
    assert worker is not None and worker.pid is not None and worker.pid != os.getpid()
    sent = put_many(store, 150)
    # when
    offloaded = store.offloader.run_once()
    # then: every sealed segment is in the object store, byte for byte, and listed
    assert offloaded == len(store.commit_log.queue.files) - 1 > 0
    objects = open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}/objects"))
    for seg in store.view.segments:
        local = store.commit_log.queue.files[0].path.parent / f"{seg.start:020d}"
        assert objects.get(commitlog_key(seg.start)) == local.read_bytes()
    store.delete_expired_files()
    assert [m.body for m in store.get_messages(TOPIC, 0, 0, 5).messages] == [b for _, b in sent[0:10:2]]
    assert store.tier_status().offload_failures == 0


def test_upload_process_killed_mid_upload_fails_the_pass_and_is_replaced(make_tiered: TieredFactory) -> None:
    # given: a paced upload that takes about two seconds per 16 KiB segment
    store = make_tiered(offload_rate_bytes=8 << 10)
    worker = store.upload_worker
    assert worker is not None
    put_many(store, 150)
    first_pid = worker.pid
    assert first_pid is not None
    killer = threading.Timer(0.5, os.kill, (first_pid, signal.SIGKILL))
    killer.start()
    # when
    assert store.offloader.run_once() == 0
    killer.join()
    # then: nothing was listed or deleted, the failure shows, and the next pass uses a new process
    status = store.tier_status()
    assert status.tiered_segments == 0 and status.offload_failures == 1
    assert "upload worker" in status.last_error
    assert store.delete_expired_files() == 0
    store.tier_config.offload_rate_bytes = 0
    assert store.offloader.run_once() > 0
    assert worker.started == 2 and worker.pid not in (None, first_pid)


def test_shutdown_interrupts_a_paced_upload(make_tiered: TieredFactory) -> None:
    store = make_tiered(offload_rate_bytes=1 << 10)  # 16 s per segment
    put_many(store, 150)
    passes = threading.Thread(target=store.offloader.run_once)
    passes.start()
    time.sleep(0.3)
    began = time.monotonic()
    store.offloader.stopping = True
    passes.join(5)
    assert not passes.is_alive() and time.monotonic() - began < 2
    assert store.view.segments == []


def test_pacer_holds_uploads_to_the_rate(tmp_path: Path) -> None:
    objects = open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}/objects"))
    path = tmp_path / "segment"
    data = os.urandom(3 << 20)
    path.write_bytes(data)
    began = time.monotonic()
    upload_file(objects, "seg", path, len(data), 5 << 20, Pacer(4 << 20))
    # 3 MiB at 4 MiB/s is 0.75 s, less the quarter second of initial credit
    assert time.monotonic() - began >= 0.45
    assert objects.get("seg") == data


class CountingStore:
    """Counts ranged GETs of the wrapped store."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.gets: list[tuple[int, int]] = []

    def put(self, key: str, data: bytes | memoryview | Path) -> ObjectInfo:
        return self.inner.put(key, data)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def get_range(self, key: str, start: int, length: int) -> bytes | memoryview:
        self.gets.append((start, length))
        return self.inner.get_range(key, start, length)

    def get(self, key: str) -> bytes:
        return self.inner.get(key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)


@contextlib.contextmanager
def blob_cache(objects: CountingStore, blocks: int, **options: int) -> Iterator[tuple[bytes, BlockCache]]:
    """A random object ``blob`` of ``blocks`` 4 KiB blocks in ``objects``, and a 64-block cache over it."""
    blob = os.urandom(blocks * 4096)
    objects.inner.put("blob", blob)
    cache = BlockCache(objects, 4096, 64 * 4096, **options)
    try:
        yield blob, cache
    finally:
        cache.close()


def local_counting(tmp_path: Path) -> CountingStore:
    return CountingStore(open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}")))


def test_sequential_reads_widen_the_read_ahead_window(tmp_path: Path) -> None:
    objects = local_counting(tmp_path)
    with blob_cache(objects, 64, prefetch_blocks=2, readahead_max_bytes=8 * 4096) as (blob, cache):
        for pos in range(0, len(blob), 1000):
            assert cache.read("blob", len(blob), pos, 1000) == blob[pos : pos + 1000]
        # 64 blocks: block 0, then windows of 2, 4 and 8 blocks (the cap), one GET each: 11 GETs
        # (32 with a fixed window of 2 blocks, 64 with one GET per block); the last window takes
        # the object's tail too when it is at most half a window (no short GET of its own)
        assert sum(length for _, length in objects.gets) == len(blob)
        assert len(objects.gets) <= 11
        lengths = sorted(length for _, length in objects.gets)
        assert lengths[-2] == 8 * 4096 and 8 * 4096 <= lengths[-1] <= 12 * 4096, lengths
        assert cache.misses <= 2


def test_a_sequential_reader_gets_the_next_segment_read_ahead(
    make_tiered: TieredFactory, tmp_path: Path
) -> None:
    counting = CountingStore(open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}/counted")))
    store = make_tiered(objects=counting, block_bytes=4096, cache_bytes=256 * 4096, prefetch_blocks=2)
    put_many(store, 600, queues=1)
    store.offloader.run_once()
    store.delete_expired_files()
    segments = len(store.view.segments)
    assert segments >= 5
    offset = 0
    while True:
        result = store.get_messages(TOPIC, 0, offset, 16)
        if not result.messages:
            break
        offset = result.next_begin_offset
    assert offset == 600
    # only the first segment's first blocks are waited for (its ConsumeQueue and CommitLog objects):
    # the next segment's objects were read ahead (else two misses per segment)
    assert store.cache.misses <= 3
    assert store.cache.hits > 10 * store.cache.misses


def test_broker_settings_set_the_offload_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQ_BROKER_TIER_OFFLOAD_RATE_BYTES", str(50 << 20))
    settings = BrokerSettings(data_dir=tmp_path / "broker")
    store = open_tiered_store(settings, small_config(tmp_path / "store"), MetadataStore(tmp_path / "meta"))
    assert store.tier_config.offload_rate_bytes == 50 << 20
    assert store.upload_worker is not None  # a broker uploads from its upload process


def test_upload_process_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    # given: a parent process whose upload process is in the middle of a paced upload (a minute)
    (tmp_path / "segment").write_bytes(os.urandom(64 << 10))
    script = (
        "import threading, time\n"
        "from pathlib import Path\n"
        "from dataplane.store.tiered.object_store import ObjectStoreSettings\n"
        "from dataplane.store.tiered.uploader import UploadWorker\n"
        f"w = UploadWorker(ObjectStoreSettings(url='file://{tmp_path}/objects'))\n"
        f"up = lambda: w.upload('seg', Path('{tmp_path}/segment'), 64 << 10, 5 << 20, 1024)\n"
        "threading.Thread(target=up, daemon=True).start()\n"
        "time.sleep(0.5)\n"
        "print(w.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    root = Path(__file__).resolve().parents[4]
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=root)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    # when: the parent is killed (as a broker by kill -9)
    parent.kill()
    parent.wait()
    # then: the upload process stops within a second or so instead of finishing its upload
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and b") Z" not in Path(f"/proc/{child}/stat").read_bytes()[:64]:
        assert time.monotonic() < deadline, "the upload process outlived its parent"
        time.sleep(0.05)
    assert not (tmp_path / "objects" / "seg").exists()


class GatedStore(CountingStore):
    """Holds every ranged GET until ``gate`` GETs are waiting at once (or the barrier times out)."""

    def __init__(self, inner: ObjectStore, gate: int) -> None:
        super().__init__(inner)
        self.barrier = threading.Barrier(gate, timeout=5)
        self.broken = False

    def get_range(self, key: str, start: int, length: int) -> bytes | memoryview:
        self.gets.append((start, length))
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            self.broken = True
        return self.inner.get_range(key, start, length)


def test_a_miss_starts_the_read_ahead_before_it_waits_for_its_own_block(tmp_path: Path) -> None:
    objects = GatedStore(open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}")), gate=2)
    with blob_cache(objects, 32, prefetch_blocks=4) as (blob, cache):
        try:
            # the miss on block 0 and the read-ahead of blocks 1-4 are in flight together
            assert cache.read("blob", len(blob), 0, 100) == blob[:100]
            assert not objects.broken
            assert sorted(objects.gets) == [(0, 4096), (4096, 4 * 4096)]
        finally:
            objects.barrier.abort()  # no later GET waits for a partner before the cache closes


def test_the_blocks_of_one_get_are_views_of_its_buffer(tmp_path: Path) -> None:
    objects = local_counting(tmp_path)
    with blob_cache(objects, 16, prefetch_blocks=8) as (blob, cache):
        assert cache.read("blob", len(blob), 0, 10) == blob[:10]
        deadline = time.monotonic() + 5
        while cache.cached_bytes < 9 * 4096 and time.monotonic() < deadline:
            time.sleep(0.01)
        window = [cache._blocks[("blob", n)] for n in range(1, 9)]
        # one GET of 8 blocks, kept as 8 views of the client's buffer (no copy per block)
        assert len(objects.gets) == 2 and len({id(block.obj) for block in window}) == 1
        [(at, view)] = cache.read_views("blob", len(blob), 4096 + 10, 100)
        assert at == 4096 + 10 and view.obj is window[0].obj
        assert bytes(view) == blob[4096 + 10 : 4096 + 110]
        # over two blocks: a view of each (what lies in it), or one contiguous copy
        views = cache.read_views("blob", len(blob), 2 * 4096 - 50, 100)
        assert [(at, bytes(v)) for at, v in views] == [
            (2 * 4096 - 50, blob[2 * 4096 - 50 : 2 * 4096]),
            (2 * 4096, blob[2 * 4096 : 2 * 4096 + 50]),
        ]
        assert cache.read("blob", len(blob), 2 * 4096 - 50, 100) == blob[2 * 4096 - 50 : 2 * 4096 + 50]


def test_lookahead_fills_half_the_cache_with_whole_objects() -> None:
    cache = BlockCache(
        CountingStore(open_object_store(ObjectStoreSettings(url="memory:///"))), 1 << 20, 64 << 20
    )
    try:
        assert cache.lookahead_objects(16 << 20) == 2
        assert cache.lookahead_objects(8 << 20) == 4
        assert cache.lookahead_objects(1 << 30) == 1
    finally:
        cache.close()


def test_clear_empties_the_cache_and_the_read_ahead_state(tmp_path: Path) -> None:
    objects = local_counting(tmp_path)
    with blob_cache(objects, 8, prefetch_blocks=0) as (blob, cache):
        assert cache.read("blob", len(blob), 0, 10) == blob[:10]
        assert cache.read("blob", len(blob), 0, 10) == blob[:10]
        assert (cache.misses, len(objects.gets)) == (1, 1)
        cache.clear()
        assert cache.cached_bytes == 0
        assert cache.read("blob", len(blob), 0, 10) == blob[:10]
        assert (cache.misses, len(objects.gets)) == (2, 2)
