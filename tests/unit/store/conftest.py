"""Fixtures for store unit tests: small segments so rollover, retention and recovery are cheap."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dataplane.store import MessageStore, MessageStoreConfig, MessageToStore

StoreFactory = Callable[..., MessageStore]


def small_config(store_dir: Path, **overrides: Any) -> MessageStoreConfig:
    values: dict[str, Any] = {
        "mapped_file_size_commit_log": 16 * 1024,
        "consume_queue_entries_per_file": 50,
        "index_hash_slot_num": 64,
        "index_max_num": 400,
        "flush_interval_ms": 50,
        "flush_consume_queue_interval_ms": 100_000,
        "clean_interval_ms": 100_000,
        "check_crc_on_read": True,
    }
    values.update(overrides)
    return MessageStoreConfig(store_dir, **values)


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[StoreFactory]:
    """Build and start stores on ``tmp_path/store``; every store still running is shut down after."""
    started: list[MessageStore] = []

    def factory(**overrides: Any) -> MessageStore:
        store = MessageStore(small_config(tmp_path / "store", **overrides))
        store.start()
        started.append(store)
        return store

    yield factory
    for store in started:
        store.shutdown()


def msg(topic: str = "ns%t", queue_id: int = 0, body: bytes = b"hello", **props: str) -> MessageToStore:
    return MessageToStore(topic, queue_id, body, dict(props))
