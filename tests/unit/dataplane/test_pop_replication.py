"""POP state through the CommitLog (dataplane/pop_replication.py): a master's changes become records
of rmq_sys_pop_state, a replica that receives the CommitLog bytes ends with the same in-flight
table, and a truncated replica rebuilds it from what remains."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dataplane.pop import NONCE, PopState
from dataplane.pop_replication import POP_TOPIC, PopReplicator
from dataplane.store import MessageStore, MessageToStore
from tests.unit.store.conftest import small_config


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[MessageStore, MessageStore]]:
    master, replica = MessageStore(small_config(tmp_path / "m")), MessageStore(small_config(tmp_path / "r"))
    master.start()
    replica.start()
    yield master, replica
    master.shutdown()
    replica.shutdown()


def _pop(path: Path, commits: list[tuple[str, str, int, int]] | None = None) -> PopState:
    return PopState(
        path,
        initial_offset=lambda g, t, q: 0,
        on_commit=lambda g, t, q, o: commits.append((g, t, q, o)) if commits is not None else None,
    )


def _copy(master: MessageStore, replica: MessageStore) -> None:
    """What HAClient does: append the master's CommitLog bytes the replica lacks."""
    offset = replica.max_physical_offset
    while offset < master.max_physical_offset:
        chunk = master.read_commit_log(offset, 4096)
        replica.append_raw(offset, chunk)
        offset += len(chunk)


def _table(pop: PopState) -> dict[object, object]:
    return {
        key: (pos.next_offset, dict(pos.in_flight), dict(pos.groups), set(pos.held))
        for key, pos in pop.items()
    }


def test_replica_applies_the_masters_changes(
    stores: tuple[MessageStore, MessageStore], tmp_path: Path
) -> None:
    master_store, replica_store = stores
    is_master = [True]
    master = _pop(tmp_path / "mp")
    PopReplicator(master, master_store, "m", lambda: is_master[0]).start(None)
    replica = _pop(tmp_path / "rp")
    PopReplicator(replica, replica_store, "r", lambda: False).start(None)
    # given deliveries and acks on the master, in batches (one RPC each) and alone
    with master.batch():
        for offset in range(4):
            master.deliver("g", "t", 0, offset, 1, 10_000 + offset, offset + 1)
    master.ack("g", "t", 0, 1)
    master.deliver("g", "t", 1, 0, 2, 20_000, 1, waiting=True)
    # (a FIFO queue: a message group in flight, the next message of that group held behind it)
    master.deliver("fifo", "t", 0, 0, 1, 30_000, 1, message_group="order-1")
    master.hold("fifo", "t", 0, 1, "order-1", 2)
    assert master_store.get_max_offset_in_queue(POP_TOPIC, 0) == 5  # one record per batch
    assert master.cl_next == 5
    # when the replica receives the CommitLog
    _copy(master_store, replica_store)
    # then it holds the same in-flight table, nonces included (handles stay valid)
    assert _table(replica) == _table(master)
    position = master.peek("g", "t", 0)
    assert position is not None
    assert replica.lookup("g", "t", 0, 2, position.in_flight[2][NONCE]) is not None
    assert replica.peek("fifo", "t", 0).held == {1}  # type: ignore[union-attr]
    assert replica.cl_next == 5
    # and changes on a node that cannot write stay local (nothing is written to its CommitLog)
    is_master[0] = False
    master.ack("g", "t", 0, 0)
    assert master_store.get_max_offset_in_queue(POP_TOPIC, 0) == 5
    # and the replica's state survives its restart (snapshot + journal, with cl_next)
    replica.close()
    reopened = _pop(tmp_path / "rp")
    assert reopened.cl_next == 5
    assert _table(reopened) == _table(replica)
    reopened.close()
    master.close()


def test_truncated_replica_rebuilds_from_the_commit_log(
    stores: tuple[MessageStore, MessageStore], tmp_path: Path
) -> None:
    master_store, replica_store = stores
    master = _pop(tmp_path / "mp")
    PopReplicator(master, master_store, "m", lambda: True).start(None)
    master.deliver("g", "t", 0, 0, 1, 10_000, 1)
    master.deliver("g", "t", 0, 1, 1, 10_000, 2)
    _copy(master_store, replica_store)
    keep = master_store.max_physical_offset
    # given an ack the replica received but that the group's new history does not hold
    master.ack("g", "t", 0, 0)
    _copy(master_store, replica_store)
    replica = _pop(tmp_path / "rp")
    replicator = PopReplicator(replica, replica_store, "r", lambda: False)
    replicator.start(None)
    assert set(replica.peek("g", "t", 0).in_flight) == {1}
    # when its CommitLog is truncated to the consistent point and the state rebuilt
    replica_store.truncate_to(keep)
    replicator.rebuild()
    # then the ack is undone: both messages are in flight again
    assert set(replica.peek("g", "t", 0).in_flight) == {0, 1}
    assert replica.cl_next == 2
    replica.close()
    master.close()


def test_state_ahead_of_the_commit_log_is_rebuilt(
    stores: tuple[MessageStore, MessageStore], tmp_path: Path
) -> None:
    master_store, _ = stores
    pop = _pop(tmp_path / "p")
    pop.deliver("g", "t", 0, 0, 1, 10_000, 1)
    pop.cl_next = 5  # the state says it applied records this CommitLog does not have
    PopReplicator(pop, master_store, "m", lambda: False).start(None)
    assert pop.cl_next == 0
    assert list(pop.items()) == []
    pop.close()


def test_rebuild_starts_from_the_newest_snapshot(
    stores: tuple[MessageStore, MessageStore], tmp_path: Path
) -> None:
    master_store, replica_store = stores
    master = _pop(tmp_path / "mp")
    writer = PopReplicator(master, master_store, "m", lambda: True, snapshot_every=4)
    writer.start(None)
    # given 10 single-change records: snapshots after records 4 and 8 (queue 1)
    for offset in range(10):
        master.deliver("g", "t", 0, offset, 1, 10_000, offset + 1)
    assert writer.snapshots == 2
    assert master_store.get_max_offset_in_queue(POP_TOPIC, 1) == 2
    _copy(master_store, replica_store)
    keep = master_store.max_physical_offset
    master.ack("g", "t", 0, 3)  # a record the group's new history will not hold
    _copy(master_store, replica_store)
    replica = _pop(tmp_path / "rp")
    replicator = PopReplicator(replica, replica_store, "r", lambda: False)
    replicator.start(None)
    assert 3 not in replica.peek("g", "t", 0).in_flight  # type: ignore[union-attr]
    applied = replicator.applied
    # when the replica is truncated and rebuilds
    replica_store.truncate_to(keep)
    replicator.rebuild()
    # then it loaded the snapshot of record 8 and applied only records 8 and 9
    assert replicator.applied - applied == 2
    assert set(replica.peek("g", "t", 0).in_flight) == set(range(10))  # type: ignore[union-attr]
    assert replica.cl_next == 10
    # and a newest snapshot missing a part (a torn put) is passed over for the one before
    part = MessageToStore(POP_TOPIC, 1, b"torn", {"POP_SNAPSHOT": "10", "POP_PART": "0/2"})
    assert replica_store.put_messages([part]).ok
    applied = replicator.applied
    replicator.rebuild()
    assert replicator.applied - applied == 2
    assert set(replica.peek("g", "t", 0).in_flight) == set(range(10))  # type: ignore[union-attr]
    replica.close()
    master.close()
