"""TransactionalMessageService over a real MessageStore: pending rebuild, backoff, max checks."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dataplane.store import MessageStore, MessageStoreConfig, MessageToStore
from dataplane.transaction import (
    CHECK_GROUP,
    HALF_TOPIC,
    EndResult,
    Pending,
    TransactionalMessageService,
    TransactionCheckService,
    TransactionError,
    to_half_message,
)
from tests.conftest import ManualClock


def _open(path: Path) -> MessageStore:
    s = MessageStore(MessageStoreConfig(path, mapped_file_size_commit_log=1 << 20))
    s.start()
    return s


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = _open(tmp_path / "store")
    yield s
    s.shutdown()


def _service(store: MessageStore, clock: ManualClock, **kw: Any) -> TransactionalMessageService:
    service = TransactionalMessageService(
        store, immunity_ms=1000, check_interval_ms=1000, max_backoff_ms=4000, max_checks=3, clock=clock, **kw
    )
    service.recover()
    return service


def _prepare(service: TransactionalMessageService, store: MessageStore, body: bytes) -> str:
    msg = to_half_message(MessageToStore("real", 1, body, {"UNIQ_KEY": body.decode().upper()}))
    result = store.put_messages([msg])
    assert result.ok
    return service.on_prepared(msg, result.entries[0])


def _real(store: MessageStore) -> list[bytes]:
    return [m.body for m in store.get_messages("real", 1, 0).messages]


def test_commit_rollback_and_idempotence(store: MessageStore) -> None:
    service = _service(store, ManualClock(time.time()))
    a, b = _prepare(service, store, b"a"), _prepare(service, store, b"b")
    assert _real(store) == []
    assert asyncio.run(service.end("real", "A", a, commit=True)) == EndResult.OK
    assert asyncio.run(service.end("real", "B", b, commit=False)) == EndResult.OK
    assert _real(store) == [b"a"]
    assert asyncio.run(service.end("real", "A", a, commit=True)) == EndResult.ALREADY
    with pytest.raises(TransactionError):
        asyncio.run(service.end("real", "A", a, commit=False))
    with pytest.raises(TransactionError):
        asyncio.run(service.end("real", "X", "0" * 32, commit=True))
    with pytest.raises(TransactionError):
        asyncio.run(service.end("real", "X", "garbage", commit=True))
    c = _prepare(service, store, b"c")
    with pytest.raises(TransactionError):  # another topic's message
        asyncio.run(service.end("other", "C", c, commit=True))
    stored = store.get_messages("real", 1, 0).messages[0]
    assert stored.properties["UNIQ_KEY"] == "A" and "REAL_TOPIC" not in stored.properties


def test_pending_rebuilt_from_half_and_op_records(tmp_path: Path) -> None:
    clock = ManualClock(time.time())
    store = _open(tmp_path / "s")
    service = _service(store, clock)
    ids = [_prepare(service, store, body) for body in (b"a", b"b", b"c", b"d")]
    asyncio.run(service.end("real", "A", ids[0], commit=True))
    asyncio.run(service.end("real", "C", ids[2], commit=False))
    pending_b = service.pending[min(p.offset for p in service.pending.values())]
    asyncio.run(service.record_check(pending_b))
    service.commit_progress()
    assert store.consumer_offsets.query(CHECK_GROUP, HALF_TOPIC, 0) == 1  # "a" is done, "b" is not
    store.consumer_offsets.persist()
    store.shutdown()

    store = _open(tmp_path / "s")
    try:
        again = _service(store, clock)
        assert sorted(p.message_id for p in again.pending.values()) == ["B", "D"]
        assert {p.message_id: p.checks for p in again.pending.values()} == {"B": 1, "D": 0}
        assert asyncio.run(again.end("real", "B", ids[1], commit=True)) == EndResult.OK
        with pytest.raises(TransactionError):  # rolled back before the restart
            asyncio.run(again.end("real", "C", ids[2], commit=True))
        assert _real(store) == [b"a", b"b"]
    finally:
        store.shutdown()


def test_checks_back_off_then_roll_back(store: MessageStore) -> None:
    clock = ManualClock(time.time())
    service = _service(store, clock)
    sent: list[tuple[str, str]] = []

    def sender(half: Any, pending: Pending, tx_id: str) -> bool:
        sent.append((pending.message_id, tx_id))
        return True

    checks = TransactionCheckService(service, sender)
    tx = _prepare(service, store, b"a")
    store_ms = next(iter(service.pending.values())).store_ms
    clock.now = (store_ms + 999) / 1000  # immune
    assert asyncio.run(checks.check_once()) == 0
    times = []
    for _ in range(100):  # 0.1 s steps over 10 s
        clock.now += 0.1
        if asyncio.run(checks.check_once()):
            times.append(clock.now * 1000 - store_ms)
    # first check once immune, then after 1 s, 2 s (doubling); after 4 s more (the cap): rolled back
    assert len(times) == 4 and 1000 <= times[0] <= 1100
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(abs(gap - want) <= 150 for gap, want in zip(gaps, [1000, 2000, 4000], strict=True)), gaps
    assert sent == [("A", tx)] * 3
    assert service.pending == {} and service.rolled_back == 1
    with pytest.raises(TransactionError):
        asyncio.run(service.end("real", "A", tx, commit=True))
    assert _real(store) == []


def test_check_without_producer_still_counts(store: MessageStore) -> None:
    clock = ManualClock(time.time())
    service = _service(store, clock)
    checks = TransactionCheckService(service, lambda half, pending, tx: False)
    _prepare(service, store, b"a")
    clock.now += 2
    assert asyncio.run(checks.check_once()) == 1
    assert next(iter(service.pending.values())).checks == 1
