"""A full disk: puts are refused whole, nothing half-written survives, and puts resume afterwards."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from dataplane.store import MessageStore, PutMessageStatus
from dataplane.store.mapped_file import MappedFile
from tests.unit.store.conftest import StoreFactory, msg


def _bodies(store: MessageStore, topic: str = "ns%t") -> list[bytes]:
    result = store.get_messages(topic, 0, 0, 10_000, 1 << 30)
    return [m.body for m in result.messages]


def test_enospc_mid_batch_rolls_the_whole_batch_back(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(disk_min_free_bytes=0, disk_full_ratio=1.0)
    first = [msg(body=bytes([i]) * 3000) for i in range(3)]
    assert store.put_messages(first).ok
    before = store.commit_log.max_offset

    real_write = MappedFile.write_head_last
    calls = {"n": 0}

    def failing_write(self: MappedFile, position: int, pieces: Any, size: int) -> None:
        calls["n"] += 1
        if calls["n"] > 1:  # the batch's first segment is written, the next one fails
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self, position, pieces, size)

    monkeypatch.setattr(MappedFile, "write_head_last", failing_write)
    # 10 x 3 KB spans the rest of the 16 KiB segment and the next one
    result = store.put_messages([msg(body=b"x" * 3000) for _ in range(10)])
    assert result.status is PutMessageStatus.DISK_FULL and result.entries == []
    assert store.commit_log.max_offset == before
    assert store.disk_full  # remembered until the next disk check
    monkeypatch.setattr(MappedFile, "write_head_last", real_write)
    store._disk_checked_at = 0.0  # space came back: the next check sees it
    assert store.put_messages([msg(body=b"after")]).ok
    assert _bodies(store) == [m.body for m in first] + [b"after"]


def test_rolled_back_bytes_never_come_back_after_recovery(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(disk_min_free_bytes=0, disk_full_ratio=1.0)
    assert store.put_messages([msg(body=b"a" * 3000) for _ in range(4)]).ok
    real_write = MappedFile.write_head_last
    calls = {"n": 0}

    def failing_write(self: MappedFile, position: int, pieces: Any, size: int) -> None:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self, position, pieces, size)

    monkeypatch.setattr(MappedFile, "write_head_last", failing_write)
    assert (
        store.put_messages([msg(body=b"lost" * 700) for _ in range(5)]).status is PutMessageStatus.DISK_FULL
    )
    monkeypatch.setattr(MappedFile, "write_head_last", real_write)
    store.shutdown()
    reopened = make_store(disk_min_free_bytes=0, disk_full_ratio=1.0)
    assert _bodies(reopened) == [b"a" * 3000] * 4


def test_watermark_refuses_before_writing(make_store: StoreFactory) -> None:
    store = make_store(disk_min_free_bytes=1 << 62)  # more than any disk has free
    result = store.put_messages([msg()])
    assert result.status is PutMessageStatus.DISK_FULL
    assert store.commit_log.max_offset == 0


def test_illegal_message_after_a_segment_roll_rolls_the_batch_back(make_store: StoreFactory) -> None:
    # given a batch whose first records fill a segment and whose last message is too big
    store = make_store()
    assert store.put_messages([msg(body=b"a" * 3000)]).ok
    before = store.commit_log.max_offset
    batch = [msg(body=b"x" * 3000) for _ in range(8)] + [msg(body=b"y" * 20_000)]
    # when
    result = store.put_messages(batch)
    # then nothing of it is stored, not even the segment it filled, and its queue offsets are free
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL and result.entries == []
    assert store.commit_log.max_offset == before
    after = store.put_messages([msg(body=b"after")])
    assert [e.queue_offset for e in after.entries] == [1]
    assert _bodies(store) == [b"a" * 3000, b"after"]
