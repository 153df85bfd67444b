"""Raw CommitLog reads, appends and truncation, as the HA replication will use them."""

from __future__ import annotations

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
