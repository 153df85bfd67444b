"""Retention: whole expired segments go, and reads of deleted offsets say where the queue starts now."""

from __future__ import annotations

import os
import time

from dataplane.store import GetMessageStatus, MessageStore
from tests.unit.store.conftest import StoreFactory, msg


def _fill(store: MessageStore, n: int) -> None:
    for i in range(0, n, 5):
        store.put_messages([msg(queue_id=0, body=b"r" * 500, KEYS=f"k{j}") for j in range(i, i + 5)])


def _age_all_but_last(store: MessageStore, hours: float) -> None:
    old = time.time() - hours * 3600
    for mf in store.commit_log.queue.files[:-1]:
        os.utime(mf.path, (old, old))


def test_expired_segments_deleted_and_offset_moved(make_store: StoreFactory) -> None:
    store = make_store(file_reserved_time_hours=72, consume_queue_entries_per_file=10)
    store.retention.usage = lambda: 0.0  # independent of the real disk
    _fill(store, 200)
    files_before = len(store.commit_log.queue.files)
    assert store.delete_expired_files() == 0
    _age_all_but_last(store, 73)
    deleted = store.delete_expired_files()
    assert deleted == min(files_before - 1, store.config.delete_files_batch_max)
    new_min = store.get_min_offset_in_queue("ns%t", 0)
    assert new_min > 0
    result = store.get_messages("ns%t", 0, 0)
    assert (result.status, result.next_begin_offset, result.min_offset) == (
        GetMessageStatus.OFFSET_TOO_SMALL,
        new_min,
        new_min,
    )
    first = store.get_messages("ns%t", 0, new_min)
    assert first.status is GetMessageStatus.FOUND
    assert first.messages[0].physical_offset >= store.min_physical_offset
    # queue files wholly below the new minimum went too
    cq = store.consume_queues.find("ns%t", 0)
    assert cq is not None and cq.queue.min_offset // 20 <= new_min
    assert cq.queue.min_offset > 0
    # index entries pointing into deleted segments are never returned
    assert store.query_messages_by_key("ns%t", "k0") == []


def test_active_segment_never_deleted(make_store: StoreFactory) -> None:
    store = make_store(file_reserved_time_hours=0)
    store.retention.usage = lambda: 1.0
    _fill(store, 10)
    assert len(store.commit_log.queue.files) == 1
    assert store.delete_expired_files(now_ms=int(time.time() * 1000) + 10**9) == 0


def test_disk_watermark_deletes_oldest(make_store: StoreFactory) -> None:
    store = make_store(disk_max_used_ratio=0.5, delete_files_batch_max=3)
    _fill(store, 100)
    files = len(store.commit_log.queue.files)
    store.retention.usage = lambda: 0.9
    assert store.delete_expired_files() == 3
    assert len(store.commit_log.queue.files) == files - 3
    assert 0.0 <= store.disk_usage_ratio() <= 1.0


def test_deleted_state_survives_restart(make_store: StoreFactory) -> None:
    store = make_store(consume_queue_entries_per_file=10)
    store.retention.usage = lambda: 0.0
    _fill(store, 200)
    _age_all_but_last(store, 100)
    store.delete_expired_files()
    new_min = store.get_min_offset_in_queue("ns%t", 0)
    max_offset = store.get_max_offset_in_queue("ns%t", 0)
    store.shutdown()
    again = make_store(consume_queue_entries_per_file=10)
    assert again.get_min_offset_in_queue("ns%t", 0) == new_min
    assert again.get_max_offset_in_queue("ns%t", 0) == max_offset
    assert again.get_messages("ns%t", 0, 0).status is GetMessageStatus.OFFSET_TOO_SMALL
