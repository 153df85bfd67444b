"""HAService -> HAClient over a real loopback socket, in one process: streaming, in-sync waits,
metadata, the truncation of a divergent tail when a node rejoins, and replication-port
authentication (a peer without the group secret gets nothing)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dataplane.ha import auth
from dataplane.ha.client import HAClient
from dataplane.ha.epoch import EpochEntry, EpochFileCache
from dataplane.ha.framing import FRAME_HEADER, FrameType, read_frame, write_frame, write_json
from dataplane.ha.service import HAService
from dataplane.store import MessageStore
from tests.unit.store.conftest import msg, small_config

pytestmark = pytest.mark.integration

KEY = auth.replication_key("group-secret", None, False)


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
    service = HAService(master, m_epochs, "g", key=KEY, meta_snapshot=lambda: {"x": 1}, meta_interval_s=0.05)
    await service.start("127.0.0.1:0")
    service.start_serving(1)
    metas: list[dict[str, Any]] = []
    client = HAClient(
        replica,
        EpochFileCache(tmp_path / "r-epoch"),
        "g",
        "r1",
        f"127.0.0.1:{service.port}",
        metas.append,
        key=KEY,
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


async def test_an_idle_master_keeps_its_replica_with_keep_alives_and_a_silent_one_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    master, replica = _store(tmp_path / "m"), _store(tmp_path / "r")
    m_epochs = EpochFileCache(tmp_path / "m-epoch")
    m_epochs.begin_epoch(1, 0)
    service = HAService(master, m_epochs, "g", key=KEY)
    await service.start("127.0.0.1:0")
    service.start_serving(1)
    client = HAClient(
        replica, EpochFileCache(tmp_path / "r-epoch"), "g", "r1", f"127.0.0.1:{service.port}", key=KEY
    )
    client.idle_timeout_s = 1.0
    client.start()
    try:
        # given a master with nothing to send: every 0.5 s it says so, and the replica stays
        await _until(lambda: client.connected and "r1" in service.replicas)
        first, connection = client.last_data, service.replicas["r1"]
        await asyncio.sleep(1.6)  # longer than the replica's idle limit
        # the same connection all along (a new one would be a new ReplicaState), fed by keep-alives
        assert client.connected and service.replicas["r1"] is connection
        assert client.last_data - first >= 1.0
        # when the master's streams go silent (a master that hangs), the replica leaves within its
        # idle limit and connects again
        quiet = asyncio.Event()

        async def silent(*_: object) -> None:
            await quiet.wait()

        monkeypatch.setattr(service, "_stream", silent)
        for writer in list(service._writers):
            writer.close()  # the connection ends: the replica connects again, to a silent stream
        await _until(lambda: not client.connected, 2.0)
        await _until(lambda: client.connected, 2.0)
        joined = asyncio.get_running_loop().time()
        await _until(lambda: not client.connected, 3.0)
        assert asyncio.get_running_loop().time() - joined >= 0.9  # it waited for its idle limit
        quiet.set()
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
    service = HAService(new, new_epochs, "g", key=KEY)
    await service.start("127.0.0.1:0")
    service.start_serving(2)
    # when the old master follows the new one
    client = HAClient(old, old_epochs, "g", "old", f"127.0.0.1:{service.port}", key=KEY)
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
    service = HAService(store, EpochFileCache(tmp_path / "e"), "g", key=KEY)
    await service.start("127.0.0.1:0")
    other = _store(tmp_path / "o")
    client = HAClient(other, EpochFileCache(tmp_path / "oe"), "g", "o", f"127.0.0.1:{service.port}", key=KEY)
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


async def _serving_master(tmp_path: Path) -> tuple[MessageStore, HAService]:
    master = _store(tmp_path / "m")
    epochs = EpochFileCache(tmp_path / "m-epoch")
    epochs.begin_epoch(1, 0)
    service = HAService(master, epochs, "g", key=KEY)
    await service.start("127.0.0.1:0")
    service.start_serving(1)
    for i in range(5):
        master.put_messages([msg(body=b"secret-%d" % i)])
    return master, service


async def _read_all(reader: asyncio.StreamReader) -> list[FrameType]:
    kinds = []
    with pytest.raises(asyncio.IncompleteReadError):
        while True:
            kind, _ = await asyncio.wait_for(read_frame(reader), 5)
            kinds.append(kind)
    return kinds


async def test_raw_socket_without_the_secret_gets_nothing(tmp_path: Path) -> None:
    master, service = await _serving_master(tmp_path)
    try:
        # given a peer that skips the challenge and says HELLO at once
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        write_json(writer, FrameType.HELLO, {"group": "g", "node": "x", "epochs": [], "max_offset": 0})
        await writer.drain()
        # then it gets the challenge, a refusal and the end of the stream: no WELCOME, DATA or META
        assert await _read_all(reader) == [FrameType.CHALLENGE, FrameType.REFUSE]
        writer.close()
        # and a peer announcing a huge frame before authenticating is cut off without buffering it
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        writer.write(FRAME_HEADER.pack(50 << 20, FrameType.AUTH))
        await writer.drain()
        assert await _read_all(reader) == [FrameType.CHALLENGE, FrameType.REFUSE]
        writer.close()
        assert service.replicas == {}
        assert service.auth_failures == 2
    finally:
        await service.stop()
        master.shutdown()


async def test_replica_with_the_wrong_secret_is_refused(tmp_path: Path) -> None:
    master, service = await _serving_master(tmp_path)
    replica = _store(tmp_path / "r")
    wrong = auth.replication_key("another-secret", None, False)
    client = HAClient(
        replica, EpochFileCache(tmp_path / "r-epoch"), "g", "r", f"127.0.0.1:{service.port}", key=wrong
    )
    client.start()
    try:
        await _until(lambda: service.auth_failures >= 2)
        # then it never connected and holds no byte of the master's CommitLog
        assert not client.connected
        assert replica.max_physical_offset == 0
        assert service.replicas == {}
        # and with the right secret the same replica catches up
        await client.stop()
        client = HAClient(
            replica, EpochFileCache(tmp_path / "r-epoch"), "g", "r", f"127.0.0.1:{service.port}", key=KEY
        )
        client.start()
        await _until(lambda: replica.max_physical_offset == master.max_physical_offset)
        bodies = [m.body for m in replica.get_messages("ns%t", 0, 0, 10).messages]
        assert bodies == [b"secret-%d" % i for i in range(5)]
    finally:
        await client.stop()
        await service.stop()
        master.shutdown()
        replica.shutdown()


async def test_replica_refuses_a_master_without_the_secret(tmp_path: Path) -> None:
    # given a fake master that answers the replica's AUTH without knowing the secret
    hellos: list[bytes] = []

    async def fake_master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        write_frame(writer, FrameType.CHALLENGE, auth.new_nonce())
        await read_frame(reader)
        write_frame(writer, FrameType.AUTH_OK, b"\0" * auth.PROOF_BYTES)
        await writer.drain()
        try:
            _, payload = await asyncio.wait_for(read_frame(reader), 1)
            hellos.append(payload)
        except (asyncio.IncompleteReadError, TimeoutError):
            pass
        writer.close()

    server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    replica = _store(tmp_path / "r")
    client = HAClient(replica, EpochFileCache(tmp_path / "r-epoch"), "g", "r", f"127.0.0.1:{port}", key=KEY)
    client.start()
    try:
        await asyncio.sleep(0.5)
        # then the replica never said HELLO (nor truncated or appended anything)
        assert hellos == []
        assert not client.connected
    finally:
        await client.stop()
        server.close()
        replica.shutdown()
