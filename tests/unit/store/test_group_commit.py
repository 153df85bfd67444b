"""SYNC_FLUSH group commit: acknowledged only once fsynced, one fsync for many writers (issue 3)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from dataplane.store import FlushDiskType, MessageStore, PutMessageStatus, PutResult
from dataplane.store.flush import GroupCommitService
from tests.unit.store.conftest import StoreFactory, msg


def _service(store: MessageStore) -> GroupCommitService:
    service = store._flush
    assert isinstance(service, GroupCommitService)
    return service


class _GatedFlush:
    """Wraps the store's real CommitLog flush: each fsync waits for ``gate`` and is logged."""

    def __init__(self, flush: Callable[[], int]):
        self._flush = flush
        self.gate = threading.Event()
        self.started = threading.Event()
        self.flushed: list[int] = []

    def __call__(self) -> int:
        self.started.set()
        self.gate.wait(10)
        offset = self._flush()
        self.flushed.append(offset)
        return offset


def _gate(store: MessageStore) -> _GatedFlush:
    service = _service(store)
    gated = _GatedFlush(service._flush)
    service._flush = gated  # the real fsync still runs, only later
    return gated


async def test_each_writer_is_acknowledged_only_after_its_record_is_fsynced(make_store: StoreFactory) -> None:
    # given 64 concurrent writers, each checking the flushed offset the moment it is acknowledged
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20)
    service = _service(store)
    before = service.fsync_count
    uncovered: list[tuple[int, int]] = []

    async def writer(i: int) -> PutResult:
        result = await store.put_messages_async([msg(body=b"w%d" % i * 40)])
        entry = result.entries[0]
        if store.commit_log.flushed_offset < entry.physical_offset + entry.size:
            uncovered.append((entry.physical_offset + entry.size, store.commit_log.flushed_offset))
        return result

    # when
    results = await asyncio.gather(*(writer(i) for i in range(64)))

    # then nobody was acknowledged before an fsync covered its record ...
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 64
    assert uncovered == []
    # ... the 64 of them were appended together and shared one fsync ...
    assert 1 <= service.fsync_count - before <= 2
    # ... and got dense queue offsets in the order they called
    assert [r.entries[0].queue_offset for r in results] == list(range(64))


async def test_no_acknowledgement_while_the_fsync_is_still_running(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    gated = _gate(store)
    tasks = [asyncio.ensure_future(store.put_messages_async([msg(body=b"slow")])) for _ in range(8)]

    # the records are appended and an fsync has started, but nobody is acknowledged yet
    assert await asyncio.to_thread(gated.started.wait, 5)
    await asyncio.sleep(0.05)
    assert store.max_physical_offset > store.commit_log.flushed_offset
    assert not any(t.done() for t in tasks)

    gated.gate.set()
    results = await asyncio.gather(*tasks)
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    end = max(r.entries[0].physical_offset + r.entries[0].size for r in results)
    assert gated.flushed and gated.flushed[-1] >= end


async def test_a_stalled_fsync_times_out_every_waiting_writer(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=200)
    gated = _gate(store)
    results = await asyncio.gather(*(store.put_messages_async([msg()]) for _ in range(4)))
    assert [r.status for r in results] == [PutMessageStatus.FLUSH_DISK_TIMEOUT] * 4
    # the messages are stored (only their durability is unconfirmed), as RocketMQ reports it
    assert all(len(r.entries) == 1 for r in results)
    gated.gate.set()
    # a writer after the stall is acknowledged normally
    assert (await store.put_messages_async([msg()])).status is PutMessageStatus.PUT_OK


async def test_one_bad_message_fails_only_its_own_caller(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    calls = [
        store.put_messages_async([msg(body=b"a"), msg(body=b"b")]),
        store.put_messages_async([msg(topic="bad/topic")]),
        store.put_messages_async([msg(body=b"c" * 70_000)]),  # past max_message_size (16 KiB log)
        store.put_messages_async([msg(body=b"d")]),
    ]
    results = await asyncio.gather(*calls)
    assert [r.status for r in results] == [
        PutMessageStatus.PUT_OK,
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.PUT_OK,
    ]
    assert [e.queue_offset for e in results[0].entries + results[3].entries] == [0, 1, 2]
    got = store.get_messages("ns%t", 0, 0, max_count=10).messages
    assert [m.body for m in got] == [b"a", b"b", b"d"]


async def test_a_caller_cancelled_before_the_append_stores_nothing(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    cancelled = asyncio.ensure_future(store.put_messages_async([msg(body=b"cancelled")]))
    kept = asyncio.ensure_future(store.put_messages_async([msg(body=b"kept")]))
    await asyncio.sleep(0)  # both are queued for the loop's next iteration
    cancelled.cancel()
    result = await kept
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert result.status is PutMessageStatus.PUT_OK
    assert [m.body for m in store.get_messages("ns%t", 0, 0).messages] == [b"kept"]


async def test_cancelling_one_waiter_leaves_the_others_of_its_fsync_waiting(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    gated = _gate(store)
    first = asyncio.ensure_future(store.put_messages_async([msg(body=b"1")]))
    second = asyncio.ensure_future(store.put_messages_async([msg(body=b"2")]))
    assert await asyncio.to_thread(gated.started.wait, 5)
    first.cancel()
    await asyncio.sleep(0.02)
    assert not second.done()
    gated.gate.set()
    assert (await second).status is PutMessageStatus.PUT_OK


async def test_writers_keep_appending_while_an_fsync_runs(make_store: StoreFactory) -> None:
    # given an fsync in progress for a first writer
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    gated = _gate(store)
    first = asyncio.ensure_future(store.put_messages_async([msg(body=b"first")]))
    assert await asyncio.to_thread(gated.started.wait, 5)
    # when more writers arrive meanwhile, their appends do not wait for that fsync
    later = [asyncio.ensure_future(store.put_messages_async([msg(body=b"later")])) for _ in range(16)]
    await asyncio.sleep(0.05)
    assert store.get_max_offset_in_queue("ns%t", 0) == 17
    # then the next fsync covers all of them
    gated.gate.set()
    results = await asyncio.gather(first, *later)
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 17
    assert len(gated.flushed) <= 3, gated.flushed


async def test_a_large_iteration_is_appended_in_parts_before_it_ends(make_store: StoreFactory) -> None:
    """Once 32 KiB of bodies wait, they are appended (and their fsync asked for) at once, while the
    rest of the iteration's callers are still arriving; order and acknowledgements are unchanged."""
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20)
    gated = _gate(store)
    batcher = store._batcher
    assert batcher is not None
    # when 10 callers of 8 KiB each enqueue in one iteration (what put_messages_async does)
    futures = []
    appended_after = []
    for i in range(10):
        futures.append(batcher.enqueue([msg(body=bytes([i]) * 8192)]))
        appended_after.append(store.get_max_offset_in_queue("ns%t", 0))
    # then every 4 callers (32 KiB) were appended as soon as they were there, in call order;
    # the last 2 wait for the end of the iteration
    assert appended_after == [0, 0, 0, 4, 4, 4, 4, 8, 8, 8]
    await asyncio.sleep(0.01)
    assert store.get_max_offset_in_queue("ns%t", 0) == 10
    assert await asyncio.to_thread(gated.started.wait, 5)
    assert not any(f.done() for f in futures)  # nobody acknowledged before the fsync
    gated.gate.set()
    results = await asyncio.gather(*futures)
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 10
    assert [r.entries[0].queue_offset for r in results] == list(range(10))
    got = store.get_messages("ns%t", 0, 0, 10).messages
    assert [m.body[0] for m in got] == list(range(10))


def test_threads_are_acknowledged_only_after_their_record_is_fsynced(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20)
    uncovered: list[int] = []

    def writer() -> None:
        for _ in range(25):
            result = store.put_messages([msg(body=b"t" * 200)])
            assert result.status is PutMessageStatus.PUT_OK
            entry = result.entries[0]
            if store.commit_log.flushed_offset < entry.physical_offset + entry.size:
                uncovered.append(entry.physical_offset)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert uncovered == []
    assert store.get_max_offset_in_queue("ns%t", 0) == 200
