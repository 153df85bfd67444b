"""READ / RECORDS on the replication port over a real loopback socket: a master's ReplicaReader gets
whole records byte for byte from another node's HAService, nothing without the group secret,
nothing (None) for records the node does not hold, and a malformed request closes the connection."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dataplane.ha import auth
from dataplane.ha.client import prove_secret
from dataplane.ha.epoch import EpochFileCache
from dataplane.ha.framing import READ_ENTRY, FrameType, read_frame, write_frame
from dataplane.ha.reads import ReplicaReader
from dataplane.ha.service import HAService
from dataplane.store import MessageStore
from tests.unit.store.conftest import msg, small_config

pytestmark = pytest.mark.integration

KEY = auth.replication_key("group-secret", None, False)


async def _node(tmp_path: Path) -> tuple[MessageStore, HAService, list[tuple[int, int]]]:
    """A node holding 40 records across several segments, serving on an ephemeral port."""
    store = MessageStore(small_config(tmp_path / "store"))
    store.start()
    entries = []
    for i in range(40):
        put = store.put_messages([msg(queue_id=i % 2, body=bytes([i]) * (300 + i), KEYS=f"k{i}")])
        entries.append((put.entries[0].physical_offset, put.entries[0].size))
    store.commit_log.flush()
    # The service answers READ whatever its role: it is not serving replicas here.
    service = HAService(store, EpochFileCache(tmp_path / "epoch"), "g", key=KEY)
    await service.start("127.0.0.1:0")
    return store, service, entries


async def test_reader_gets_records_byte_for_byte(tmp_path: Path) -> None:
    store, service, entries = await _node(tmp_path)
    reader = ReplicaReader(KEY, "g")
    try:
        address = f"127.0.0.1:{service.port}"
        wanted = entries[3:30:3]
        records = await reader.read(address, wanted)
        assert records is not None
        assert records == [store.read_commit_log(o, n) for o, n in wanted]
        # decoded on the asking side, CRC checked, they are the messages the node itself reads
        for (offset, _), raw in zip(wanted, records, strict=True):
            assert store.decode_raw(raw, offset) == store.look_message_by_offset(offset)
        # one connection serves request after request
        assert await reader.read(address, entries[:1]) == [store.read_commit_log(*entries[0])]
        assert service.reads_served == len(wanted) + 1
        # records past the node's end, or not at a record boundary: None, and the connection stays
        end = store.max_physical_offset
        assert await reader.read(address, [(end, 100)]) is None
        assert await reader.read(address, [(entries[5][0] + 1, entries[5][1])]) is None
        assert await reader.read(address, [entries[6], (end + 10, 50)]) is None
        assert await reader.read(address, entries[7:8]) == [store.read_commit_log(*entries[7])]
        assert reader.failures == 0
    finally:
        await reader.close()
        await service.stop()
        store.shutdown()


async def test_a_connection_the_node_closed_while_idle_is_replaced(tmp_path: Path) -> None:
    store, service, entries = await _node(tmp_path)
    service.read_idle_s = 0.2
    reader = ReplicaReader(KEY, "g")
    try:
        address = f"127.0.0.1:{service.port}"
        assert await reader.read(address, entries[:2]) is not None
        await asyncio.sleep(0.5)  # the node drops the idle connection
        # the next read finds its connection closed: it reconnects once, no failure, no backoff
        assert await reader.read(address, entries[2:4]) == [store.read_commit_log(*e) for e in entries[2:4]]
        assert reader.failures == 0 and reader.available(address)
    finally:
        await reader.close()
        await service.stop()
        store.shutdown()


async def test_reader_without_the_secret_gets_nothing(tmp_path: Path) -> None:
    store, service, entries = await _node(tmp_path)
    wrong = ReplicaReader(auth.replication_key("another-secret", None, False), "g")
    other_group = ReplicaReader(KEY, "h")
    try:
        address = f"127.0.0.1:{service.port}"
        assert await wrong.read(address, entries[:3]) is None
        assert await other_group.read(address, entries[:3]) is None
        assert wrong.failures == 1 and other_group.failures == 1
        # a node that failed is left alone for a while (a hung node costs one timeout, not one per pull)
        assert not wrong.available(address)
        assert ReplicaReader(KEY, "g").available(address)
        assert service.auth_failures == 2 and service.reads_served == 0
    finally:
        await wrong.close()
        await other_group.close()
        await service.stop()
        store.shutdown()


async def test_malformed_read_closes_the_connection(tmp_path: Path) -> None:
    store, service, _ = await _node(tmp_path)
    reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
    try:
        await prove_secret(reader, writer, KEY, "g", "node")
        write_frame(writer, FrameType.READ, READ_ENTRY.pack(-5, 10))  # a negative offset
        await writer.drain()
        with pytest.raises(asyncio.IncompleteReadError):
            await asyncio.wait_for(read_frame(reader), 5)
        assert service.reads_served == 0
    finally:
        writer.close()
        await service.stop()
        store.shutdown()
