"""Raw CommitLog reads, appends and truncation, as the HA replication will use them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dataplane.store import CorruptRecordError, MessageStore
from tests.unit.store.conftest import StoreFactory, msg, small_config


def test_replica_applies_master_bytes(make_store: StoreFactory, tmp_path: Path) -> None:
    master = make_store()
    for i in range(40):
        master.put_messages([msg(queue_id=i % 2, body=bytes([i]) * 300, KEYS=f"k{i}")])
    replica = MessageStore(small_config(tmp_path / "replica"))
    replica.start()
    try:
        offset = 0
        while offset < master.max_physical_offset:
            data = master.read_commit_log(offset, 2000)
            assert data
            replica.append_raw(offset, data)
            offset += len(data)
        assert replica.max_physical_offset == master.max_physical_offset
        for qid in (0, 1):
            a = master.get_messages("ns%t", qid, 0, 100).messages
            b = replica.get_messages("ns%t", qid, 0, 100).messages
            assert a == b
        assert [m.body for m in replica.query_messages_by_key("ns%t", "k5")] == [bytes([5]) * 300]
        with pytest.raises(CorruptRecordError):
            replica.append_raw(replica.max_physical_offset, b"\x00" * 20)
    finally:
        replica.shutdown()


def test_a_replica_indexes_each_batch_at_its_own_store_time(make_store: StoreFactory, tmp_path: Path) -> None:
    # given two master batches stored at different times, applied by the replica in one chunk
    master = make_store()
    first = master.put_messages([msg(queue_id=i % 2, KEYS=f"a{i}", UNIQ_KEY=f"A{i}") for i in range(5)])
    time.sleep(0.005)
    second = master.put_messages([msg(queue_id=i % 2, KEYS=f"b{i}", UNIQ_KEY=f"B{i}") for i in range(5)])
    t1, t2 = first.entries[0].store_timestamp, second.entries[0].store_timestamp
    assert t1 < t2
    replica = MessageStore(small_config(tmp_path / "replica"))
    replica.start()
    try:
        data = master.read_commit_log(0, 1 << 20)
        assert len(data) == master.max_physical_offset
        replica.append_raw(0, data)
        # then every key is found on the replica, and only within its own batch's store time
        for prefix, ts, other in (("a", t1, t2), ("b", t2, t1)):
            for i in range(5):
                found = replica.query_messages_by_key("ns%t", f"{prefix}{i}", begin_ms=ts, end_ms=ts)
                assert [m.properties["KEYS"] for m in found] == [f"{prefix}{i}"]
                assert [m.store_timestamp for m in found] == [ts]
                assert not replica.query_messages_by_key("ns%t", f"{prefix}{i}", begin_ms=other, end_ms=other)
                assert len(replica.query_messages_by_uniq_key(f"{prefix.upper()}{i}")) == 1
        for qid in (0, 1):
            ours, theirs = replica.get_messages("ns%t", qid, 0, 10), master.get_messages("ns%t", qid, 0, 10)
            assert ours.messages == theirs.messages
    finally:
        replica.shutdown()


def test_truncate_to(make_store: StoreFactory) -> None:
    store = make_store()
    entries = [store.put_messages([msg(body=bytes([i]) * 500)]).entries[0] for i in range(60)]
    cut = entries[45].physical_offset
    store.truncate_to(cut)
    assert store.max_physical_offset == cut
    assert store.get_max_offset_in_queue("ns%t", 0) == 45
    again = store.put_messages([msg(body=b"new")]).entries[0]
    assert (again.physical_offset, again.queue_offset) == (cut, 45)
    assert store.get_messages("ns%t", 0, 45).messages[0].body == b"new"
