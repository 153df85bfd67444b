"""HAService -> HAClient over a real loopback socket, in one process: streaming, in-sync waits,
metadata, and the truncation of a divergent tail when a node rejoins."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dataplane.ha.client import HAClient
from dataplane.ha.epoch import EpochEntry, EpochFileCache
from dataplane.ha.service import HAService
from dataplane.store import MessageStore
from tests.unit.store.conftest import msg, small_config

pytestmark = pytest.mark.integration


def _store(path: Path) -> MessageStore:
    store = MessageStore(small_config(path))
    store.start()
    return store


async def _until(predicate: Any, limit_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_stream_wait_and_meta(tmp_path: Path) -> None:
    master, replica = _store(tmp_path / "m"), _store(tmp_path / "r")
    m_epochs = EpochFileCache(tmp_path / "m-epoch")
    m_epochs.begin_epoch(1, 0)
    service = HAService(master, m_epochs, "g", meta_snapshot=lambda: {"x": 1}, meta_interval_s=0.05)
    await service.start("127.0.0.1:0")
    service.start_serving(1)
    metas: list[dict[str, Any]] = []
    client = HAClient(
        replica, EpochFileCache(tmp_path / "r-epoch"), "g", "r1", f"127.0.0.1:{service.port}", metas.append
    )
    client.start()
    try:
        # given data written before the replica connected (spanning several 16 KiB segments)
        for i in range(60):
            master.put_messages([msg(queue_id=i % 2, body=bytes([i]) * 700, KEYS=f"k{i}")])
        await _until(lambda: replica.max_physical_offset == master.max_physical_offset)
        # then queues and indexes are rebuilt on the replica
        assert (
            replica.get_messages("ns%t", 1, 0, 100).messages
            == master.get_messages("ns%t", 1, 0, 100).messages
        )
        assert [m.body for m in replica.query_messages_by_key("ns%t", "k7")] == [bytes([7]) * 700]
        assert metas and metas[-1] == {"x": 1}
        # a confirmation counts only once the controller put the replica in the SyncStateSet
        end = master.put_messages([msg(body=b"late")]).entries[0]
        offset = end.physical_offset + end.size
        assert not await service.wait_replicated(offset, 1, 0.3)
        service.controller_sss = {"m", "r1"}
        assert await service.wait_replicated(offset, 1, 3.0)
        assert service.local_in_sync() == ["r1"]
        assert not await service.wait_replicated(offset, 2, 0.2)  # only one replica exists
        assert client.epochs.entries == [EpochEntry(1, 0)]
    finally:
        await client.stop()
        await service.stop()
        master.shutdown()
        replica.shutdown()


async def test_rejoining_node_truncates_divergent_tail(tmp_path: Path) -> None:
    # given an old master whose last records never reached the node that became the new master
    old, new = _store(tmp_path / "old"), _store(tmp_path / "new")
    old_epochs, new_epochs = EpochFileCache(tmp_path / "old-epoch"), EpochFileCache(tmp_path / "new-epoch")
    old_epochs.begin_epoch(1, 0)
    new_epochs.begin_epoch(1, 0)
    for i in range(10):
        data = old.put_messages([msg(body=b"shared-%d" % i)])
        assert data.entries
    shared = old.max_physical_offset
    offset = 0
    while offset < shared:
        chunk = old.read_commit_log(offset, 4096)
        new.append_raw(offset, chunk)
        offset += len(chunk)
    old.put_messages([msg(body=b"divergent-%d" % i) for i in range(5)])
    new_epochs.begin_epoch(2, new.max_physical_offset)
    new.put_messages([msg(body=b"epoch2-%d" % i) for i in range(3)])
    service = HAService(new, new_epochs, "g")
    await service.start("127.0.0.1:0")
    service.start_serving(2)
    # when the old master follows the new one
    client = HAClient(old, old_epochs, "g", "old", f"127.0.0.1:{service.port}")
    client.start()
    try:
        await _until(lambda: client.connected and old.max_physical_offset == new.max_physical_offset)
        # then its tail was replaced by the new master's records, and it adopted the epochs
        bodies = [m.body for m in old.get_messages("ns%t", 0, 0, 100).messages]
        assert bodies == [b"shared-%d" % i for i in range(10)] + [b"epoch2-%d" % i for i in range(3)]
        assert old_epochs.entries == [EpochEntry(1, 0), EpochEntry(2, shared)]
    finally:
        await client.stop()
        await service.stop()
        old.shutdown()
        new.shutdown()


async def test_not_master_refuses(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    service = HAService(store, EpochFileCache(tmp_path / "e"), "g")
    await service.start("127.0.0.1:0")
    other = _store(tmp_path / "o")
    client = HAClient(other, EpochFileCache(tmp_path / "oe"), "g", "o", f"127.0.0.1:{service.port}")
    client.start()
    try:
        await asyncio.sleep(0.3)
        assert not client.connected
        assert service.replicas == {}
    finally:
        await client.stop()
        await service.stop()
        store.shutdown()
        other.shutdown()
