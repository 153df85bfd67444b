"""READ / RECORDS on the replication port over a real loopback socket: a master's ReplicaReader gets
whole records byte for byte from another node's HAService, nothing without the group secret,
nothing (None) for records the node does not hold, and a malformed request closes the connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
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


class Node:
    """A node holding 40 records across several segments, its HAService on an ephemeral port (it
    answers READ whatever its role: it serves no replica here)."""

    def __init__(self, store: MessageStore, service: HAService, entries: list[tuple[int, int]]) -> None:
        self.store = store
        self.service = service
        self.entries = entries
        self.address = f"127.0.0.1:{service.port}"

    def raw(self, wanted: list[tuple[int, int]]) -> list[bytes]:
        return [self.store.read_commit_log(o, n) for o, n in wanted]


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    store = MessageStore(small_config(tmp_path / "store"))
    store.start()
    entries = []
    for i in range(40):
        put = store.put_messages([msg(queue_id=i % 2, body=bytes([i]) * (300 + i), KEYS=f"k{i}")])
        entries.append((put.entries[0].physical_offset, put.entries[0].size))
    store.commit_log.flush()
    service = HAService(store, EpochFileCache(tmp_path / "epoch"), "g", key=KEY)
    await service.start("127.0.0.1:0")
    try:
        yield Node(store, service, entries)
    finally:
        await service.stop()
        store.shutdown()


@pytest.fixture
async def readers() -> AsyncIterator[list[ReplicaReader]]:
    """Readers a test makes (append to the list); closed after it."""
    made: list[ReplicaReader] = []
    yield made
    for reader in made:
        await reader.close()


def _reader(readers: list[ReplicaReader], key: bytes = KEY, group: str = "g") -> ReplicaReader:
    readers.append(ReplicaReader(key, group))
    return readers[-1]


async def test_reader_gets_records_byte_for_byte(node: Node, readers: list[ReplicaReader]) -> None:
    store, entries, address = node.store, node.entries, node.address
    reader = _reader(readers)
    wanted = entries[3:30:3]
    records = await reader.read(address, wanted)
    assert records == node.raw(wanted)
    # decoded on the asking side, CRC checked, they are the messages the node itself reads
    for (offset, _), raw in zip(wanted, records, strict=True):
        assert store.decode_raw(raw, offset) == store.look_message_by_offset(offset)
    # one connection serves request after request
    assert await reader.read(address, entries[:1]) == node.raw(entries[:1])
    assert node.service.reads_served == len(wanted) + 1
    # records past the node's end, or not at a record boundary: None, and the connection stays
    end = store.max_physical_offset
    assert await reader.read(address, [(end, 100)]) is None
    assert await reader.read(address, [(entries[5][0] + 1, entries[5][1])]) is None
    assert await reader.read(address, [entries[6], (end + 10, 50)]) is None
    assert await reader.read(address, entries[7:8]) == node.raw(entries[7:8])
    assert reader.failures == 0


async def test_a_connection_the_node_closed_while_idle_is_replaced(
    node: Node, readers: list[ReplicaReader]
) -> None:
    node.service.read_idle_s = 0.2
    reader = _reader(readers)
    assert await reader.read(node.address, node.entries[:2]) is not None
    await asyncio.sleep(0.5)  # the node drops the idle connection
    # the next read finds its connection closed: it reconnects once, no failure, no backoff
    assert await reader.read(node.address, node.entries[2:4]) == node.raw(node.entries[2:4])
    assert reader.failures == 0 and reader.available(node.address)


async def test_reader_without_the_secret_gets_nothing(node: Node, readers: list[ReplicaReader]) -> None:
    wrong = _reader(readers, key=auth.replication_key("another-secret", None, False))
    other_group = _reader(readers, group="h")
    assert await wrong.read(node.address, node.entries[:3]) is None
    assert await other_group.read(node.address, node.entries[:3]) is None
    assert wrong.failures == 1 and other_group.failures == 1
    # a node that failed is left alone for a while (a hung node costs one timeout, not one per pull)
    assert not wrong.available(node.address)
    assert ReplicaReader(KEY, "g").available(node.address)
    assert node.service.auth_failures == 2 and node.service.reads_served == 0


async def test_malformed_read_closes_the_connection(node: Node) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", node.service.port)
    try:
        await prove_secret(reader, writer, KEY, "g", "node")
        write_frame(writer, FrameType.READ, READ_ENTRY.pack(-5, 10))  # a negative offset
        await writer.drain()
        with pytest.raises(asyncio.IncompleteReadError):
            await asyncio.wait_for(read_frame(reader), 5)
        assert node.service.reads_served == 0
    finally:
        writer.close()
