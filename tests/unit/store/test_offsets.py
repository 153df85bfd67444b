"""Offset by store time, store time by offset, and persisted consumer offsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dataplane.store import ConsumerOffsetManager, CorruptRecordError, MessageStore
from dataplane.store import message_store as message_store_module
from tests.unit.store.conftest import StoreFactory, msg


def test_offset_by_time(make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store()
    clock = {"now": 1_000_000}
    monkeypatch.setattr(message_store_module.time, "time_ns", lambda: clock["now"] * 1_000_000)
    for i in range(30):
        clock["now"] = 1_000_000 + i * 10
        store.put_messages([msg(body=bytes([i]))])
    assert store.get_offset_in_queue_by_time("ns%t", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("ns%t", 0, 1_000_000) == 0
    assert store.get_offset_in_queue_by_time("ns%t", 0, 1_000_105) == 11
    assert store.get_offset_in_queue_by_time("ns%t", 0, 1_000_110) == 11
    assert store.get_offset_in_queue_by_time("ns%t", 0, 9_999_999) == 30
    assert store.get_store_time("ns%t", 0, 7) == 1_000_070
    assert store.get_store_time("ns%t", 0, 99) == -1


def test_store_time_never_goes_backwards(make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store()
    times = iter([5_000, 4_000, 6_000])
    monkeypatch.setattr(message_store_module.time, "time_ns", lambda: next(times) * 1_000_000)
    stamps = [store.put_messages([msg()]).entries[0].store_timestamp for _ in range(3)]
    assert stamps == [5_000, 5_000, 6_000]


def test_consumer_offsets_persist_and_reload(make_store: StoreFactory) -> None:
    store = make_store()
    offsets = store.consumer_offsets
    offsets.commit("ns%g", "ns%t", 0, 17)
    offsets.commit("ns%g", "ns%t", 1, 3)
    offsets.commit("ns%other", "ns%t", 0, 5)
    assert offsets.query("ns%g", "ns%t", 0) == 17
    assert offsets.query("ns%g", "ns%t", 9) is None
    assert offsets.groups_for_topic("ns%t") == {"ns%g", "ns%other"}
    offsets.remove_group("ns%other")
    store.shutdown()
    again = make_store()
    assert again.consumer_offsets.query("ns%g", "ns%t", 0) == 17
    assert again.consumer_offsets.query("ns%g", "ns%t", 1) == 3
    assert again.consumer_offsets.groups_for_topic("ns%t") == {"ns%g"}


def test_consumer_offsets_atomic_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    manager = ConsumerOffsetManager(path)
    manager.commit("g", "%RETRY%ns%g", 2, 9)
    manager.persist()
    assert json.loads(path.read_text()) == {"offsetTable": {"%RETRY%ns%g@g": {"2": 9}}}
    assert not path.with_name(path.name + ".tmp").exists()
    path.write_text("{not json")
    with pytest.raises(CorruptRecordError, match="expected an offsetTable"):
        ConsumerOffsetManager(path).load()


def test_offsets_persisted_periodically(make_store: StoreFactory) -> None:
    import time

    store: MessageStore = make_store(flush_consumer_offset_interval_ms=20)
    store.consumer_offsets.commit("g", "t", 0, 1)
    path = store.config.store_dir / "config" / "consumerOffset.json"
    deadline = time.monotonic() + 5
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert json.loads(path.read_text())["offsetTable"] == {"t@g": {"0": 1}}
