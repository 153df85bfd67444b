"""Put and get through the MessageStore facade."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from dataplane.store import FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus
from tests.unit.store.conftest import StoreFactory, msg


def test_put_returns_offsets_and_ids(make_store: StoreFactory) -> None:
    store = make_store()
    result = store.put_messages([msg(body=b"a"), msg(body=b"b"), msg(queue_id=1, body=b"c")])
    assert result.status is PutMessageStatus.PUT_OK
    assert [e.queue_offset for e in result.entries] == [0, 1, 0]
    assert result.entries[1].physical_offset == result.entries[0].size
    for entry in result.entries:
        assert store.look_message_by_id(entry.msg_id) is not None
        assert store.look_message_by_offset(entry.physical_offset).msg_id == entry.msg_id
    assert store.get_max_offset_in_queue("ns%t", 0) == 2
    assert store.get_min_offset_in_queue("ns%t", 0) == 0


def test_get_batches_across_segments(make_store: StoreFactory) -> None:
    store = make_store()
    bodies = [bytes([i % 256]) * (i * 37 % 900) for i in range(300)]
    for i in range(0, 300, 7):
        assert store.put_messages([msg(body=b) for b in bodies[i : i + 7]]).status is PutMessageStatus.PUT_OK
    assert len(store.commit_log.queue.files) > 5
    got, offset = [], 0
    while True:
        result = store.get_messages("ns%t", 0, offset, max_count=32)
        if result.status is not GetMessageStatus.FOUND:
            assert result.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
            break
        got.extend(result.messages)
        offset = result.next_begin_offset
    assert [m.body for m in got] == bodies
    assert [m.queue_offset for m in got] == list(range(300))


def test_get_statuses(make_store: StoreFactory) -> None:
    store = make_store()
    assert store.get_messages("ns%t", 0, 0).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    store.put_messages([msg(), msg()])
    assert store.get_messages("ns%t", 0, 2).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    bad = store.get_messages("ns%t", 0, 9)
    assert (bad.status, bad.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 2)


def test_max_bytes_returns_at_least_one(make_store: StoreFactory) -> None:
    store = make_store()
    store.put_messages([msg(body=b"x" * 1000) for _ in range(5)])
    assert len(store.get_messages("ns%t", 0, 0, max_bytes=10).messages) == 1
    assert len(store.get_messages("ns%t", 0, 0, max_bytes=2500).messages) == 2


def test_tag_filter(make_store: StoreFactory) -> None:
    store = make_store()
    store.put_messages([msg(body=bytes([i]), TAGS="even" if i % 2 == 0 else "odd") for i in range(20)])
    result = store.get_messages("ns%t", 0, 0, max_count=100, tag_filter={"odd"})
    assert [m.body[0] for m in result.messages] == list(range(1, 20, 2))
    assert result.next_begin_offset == 20
    none = store.get_messages("ns%t", 0, 0, tag_filter={"missing"})
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE
    assert len(store.get_messages("ns%t", 0, 0, max_count=100, tag_filter={"*"}).messages) == 20


@pytest.mark.parametrize("topic", ["", "a/b", "..", "x\0y", "t" * 256])
def test_invalid_topics_rejected(make_store: StoreFactory, topic: str) -> None:
    store = make_store()
    assert store.put_messages([msg(topic=topic)]).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.max_physical_offset == 0


@pytest.mark.parametrize("topic", ["ns%topic", "%RETRY%ns%group", "%DLQ%ns%group", "rmq_sys_trace"])
def test_rocketmq_topic_names_accepted(make_store: StoreFactory, topic: str) -> None:
    store = make_store()
    assert store.put_messages([msg(topic=topic)]).status is PutMessageStatus.PUT_OK
    assert store.get_messages(topic, 0, 0).messages[0].topic == topic


def test_oversized_message_rejected(make_store: StoreFactory) -> None:
    store = make_store(max_message_size=2048)
    assert store.put_messages([msg(body=b"x" * 4096)]).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_messages([msg()]).entries[0].queue_offset == 0


def test_dispatch_listener_and_visibility(make_store: StoreFactory) -> None:
    store = make_store()
    seen: list[tuple[str, int, int]] = []

    def listener(topic: str, queue_id: int, max_offset: int) -> None:
        seen.append((topic, queue_id, max_offset))
        assert store.get_max_offset_in_queue(topic, queue_id) >= max_offset

    store.add_dispatch_listener(listener)
    store.put_messages([msg(), msg(), msg(queue_id=3)])
    assert sorted(seen) == [("ns%t", 0, 2), ("ns%t", 3, 1)]


def test_sync_flush_concurrent_writers_dense_offsets(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    offsets: list[int] = []
    lock = threading.Lock()

    def writer() -> None:
        for _ in range(20):
            result = store.put_messages([msg(body=b"s" * 100)])
            assert result.status is PutMessageStatus.PUT_OK
            with lock:
                offsets.append(result.entries[0].queue_offset)
            assert store.commit_log.flushed_offset >= result.entries[0].physical_offset

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(offsets) == list(range(160))


async def test_group_commit_shares_one_fsync_among_concurrent_writers(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    service = store._flush
    before = service.fsync_count
    results = await asyncio.gather(*(store.put_messages_async([msg(body=b"g" * 100)]) for _ in range(64)))
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    # every writer was acknowledged only once durable ...
    end = max(r.entries[0].physical_offset + r.entries[0].size for r in results)
    assert store.commit_log.flushed_offset >= end
    # ... and the 64 of them shared a few fsyncs instead of one each
    fsyncs = service.fsync_count - before
    assert 1 <= fsyncs <= 16, fsyncs


async def test_put_messages_async_sync_flush(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    result = await store.put_messages_async([msg(body=b"async")])
    assert result.status is PutMessageStatus.PUT_OK
    assert store.commit_log.flushed_offset >= result.entries[0].physical_offset + result.entries[0].size
    assert store.get_messages("ns%t", 0, 0).messages[0].body == b"async"


def test_put_after_shutdown(make_store: StoreFactory) -> None:
    store = make_store()
    store.shutdown()
    assert store.put_messages([msg()]).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_second_process_locked_out(make_store: StoreFactory) -> None:
    from dataplane.store import StoreLockedError

    store = make_store()
    with pytest.raises(StoreLockedError):
        MessageStore(store.config).start()


def test_segments_are_named_by_start_offset_and_zero_filled(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store()
    size = store.config.mapped_file_size_commit_log
    ends = []
    while len(ends) < 2 or ends[-1] <= size:  # into the second segment
        entry = store.put_messages([msg(body=b"z" * 700)]).entries[0]
        ends.append(entry.physical_offset + entry.size)
    files = sorted((tmp_path / "store" / "commitlog").iterdir())
    assert [f.name for f in files] == [f"{0:020d}", f"{size:020d}"]
    # the whole segment exists from the start, zeroes past what was written
    second = files[1].read_bytes()
    assert len(second) == size
    assert second[ends[-1] - size :] == bytes(size - (ends[-1] - size))
