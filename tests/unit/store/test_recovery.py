"""Recovery after clean and unclean stops: torn tails, lost checkpoints, lost queues and indexes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dataplane.store import GetMessageStatus, MessageStore, PutMessageStatus
from dataplane.store.checkpoint import StoreCheckpoint
from dataplane.store.consume_queue import CQ_ENTRY
from tests.unit.store.conftest import StoreFactory, msg, small_config


def _fill(store: MessageStore, n: int = 120) -> list[bytes]:
    bodies = [f"m{i}".encode() * (i % 40 + 1) for i in range(n)]
    for i in range(0, n, 6):
        batch = [msg(queue_id=j % 3, body=b, KEYS=f"k{i + j}") for j, b in enumerate(bodies[i : i + 6])]
        assert store.put_messages(batch).status is PutMessageStatus.PUT_OK
    return bodies


def _crash(store: MessageStore) -> None:
    """Simulate SIGKILL: page cache survives, nothing is flushed or checkpointed, abort stays."""
    for service in store._services:
        service.shutdown()
    if store._flush is not None:
        store._flush.shutdown()
    store._running = False
    store.commit_log.close()
    store.consume_queues.close()
    store.index.close()
    assert store._lock_fd is not None
    os.close(store._lock_fd)
    store._lock_fd = None


def _read_all(store: MessageStore) -> dict[int, list[bytes]]:
    out = {}
    for qid in range(3):
        result = store.get_messages("ns%t", qid, 0, max_count=1000)
        assert [m.queue_offset for m in result.messages] == list(range(len(result.messages)))
        out[qid] = [m.body for m in result.messages]
    return out


def test_clean_restart_keeps_everything(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store)
    before = _read_all(store)
    store.shutdown()
    assert not (store.config.store_dir / "abort").exists()
    again = make_store()
    assert _read_all(again) == before
    assert again.put_messages([msg()]).entries[0].queue_offset == 40


def test_unclean_stop_without_checkpoint_rebuilds_queues_and_index(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store)
    before = _read_all(store)
    root = store.config.store_dir
    _crash(store)
    (root / "checkpoint").unlink(missing_ok=True)
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    again = make_store()
    assert _read_all(again) == before
    assert [m.body for m in again.query_messages_by_key("ns%t", "k7")] == [before[1][2]]


def test_torn_tail_is_truncated(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store)
    before = _read_all(store)
    end = store.max_physical_offset
    root = store.config.store_dir
    _crash(store)
    segment = sorted((root / "commitlog").iterdir())[-1]
    rel = end - int(segment.name)
    # a record that was half written when the process died: valid prefix, garbage afterwards
    with open(segment, "r+b") as f:
        f.seek(rel)
        f.write((300).to_bytes(4, "big") + (0xDAA320A7).to_bytes(4, "big") + os.urandom(100))
    again = make_store()
    assert again.max_physical_offset == end
    assert _read_all(again) == before
    with open(segment, "rb") as f:
        f.seek(rel)
        assert f.read(108) == bytes(108)  # truncated tail reads as zeroes again
    result = again.put_messages([msg(queue_id=0, body=b"after")])
    assert result.entries[0].physical_offset == end
    assert result.entries[0].queue_offset == len(before[0])


def test_stale_queue_entries_beyond_log_end_are_dropped(tmp_path: Path, make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store, 60)
    keep_end = store.max_physical_offset
    snapshot = tmp_path / "snap"
    store.checkpoint()
    _crash(store)
    root = store.config.store_dir
    shutil.copytree(root / "commitlog", snapshot)
    # more messages are written and dispatched, then the log loses them (e.g. a torn write)
    store2 = make_store()
    _fill(store2, 60)
    _crash(store2)
    shutil.rmtree(root / "commitlog")
    shutil.copytree(snapshot, root / "commitlog")
    again = make_store()
    assert again.max_physical_offset == keep_end
    assert again.get_max_offset_in_queue("ns%t", 0) == 20
    assert again.get_messages("ns%t", 0, 20).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    assert _read_all(again)[0][-1].startswith(b"m57")


def _scan_start(store_dir: Path, **overrides: int) -> tuple[int, int]:
    """(where recovery started scanning, the end of the log) for a store reopened with ``overrides``."""
    again = MessageStore(small_config(store_dir, **overrides))
    scanned: list[int] = []
    original = again.commit_log.recover

    def spy(start: int, dispatch: object) -> int:
        scanned.append(start)
        return original(start, dispatch)  # type: ignore[arg-type]

    again.commit_log.recover = spy  # type: ignore[method-assign]
    again.start()
    try:
        return scanned[0], again.max_physical_offset
    finally:
        again.shutdown()


def test_checkpoint_spares_scan_after_clean_stop(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store)
    store.shutdown()
    start, end = _scan_start(store.config.store_dir, recovery_verify_bytes=0)
    assert start == end


def test_start_up_reverifies_a_window_from_a_record_boundary(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store)
    starts = sorted(
        m.physical_offset for q in range(3) for m in store.get_messages("ns%t", q, 0, 1000).messages
    )
    store.shutdown()
    size = store.config.mapped_file_size_commit_log
    window = size // 2 + 7
    start, end = _scan_start(store.config.store_dir, recovery_verify_bytes=window)
    # the last record at or before end - window: at least the window, at most one record more
    expected = max(p for p in starts if p <= end - window)
    assert start == expected and start % size != 0
    start, end = _scan_start(store.config.store_dir, recovery_verify_bytes=-1)
    assert start == 0


def test_a_damaged_queue_entry_falls_back_to_the_segment_start(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store)
    store.shutdown()
    root = store.config.store_dir
    size = store.config.mapped_file_size_commit_log
    window = size // 2 + 7
    clean_start, end = _scan_start(root, recovery_verify_bytes=window)
    # the queue entry of that boundary now points one byte into the record
    damaged = 0
    for path in (p for p in (root / "consumequeue").rglob("*") if p.is_file() and len(p.name) == 20):
        data = bytearray(path.read_bytes())
        for at in range(0, len(data) - 19, 20):
            phys, length, tag = CQ_ENTRY.unpack_from(data, at)
            if phys == clean_start:
                CQ_ENTRY.pack_into(data, at, phys + 1, length, tag)
                damaged += 1
        path.write_bytes(bytes(data))
    assert damaged == 1
    start, end = _scan_start(root, recovery_verify_bytes=window)
    assert start == (end - window) - (end - window) % size


def _flip_body_byte(store_dir: Path, physical_offset: int, file_size: int) -> None:
    from dataplane.store.record import HEADER_SIZE

    segment = store_dir / "commitlog" / f"{physical_offset - physical_offset % file_size:020d}"
    with open(segment, "r+b") as f:
        f.seek(physical_offset % file_size + HEADER_SIZE)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))


def test_bit_flip_after_clean_stop_is_found_and_only_that_message_dropped(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store)
    before = _read_all(store)
    victim = store.get_messages("ns%t", 1, 5, max_count=1).messages[0]
    root = store.config.store_dir
    store.shutdown()  # clean: a checkpoint says everything is dispatched
    _flip_body_byte(root, victim.physical_offset, store.config.mapped_file_size_commit_log)
    again = make_store()
    report = again.recovery_report
    assert report["corrupt_records"] == [victim.physical_offset]
    assert report["truncated_at"] is None and report["dropped_bytes"] == 0
    assert (root / "recovery-report.json").exists()
    after = {q: [m.body for m in again.get_messages("ns%t", q, 0, max_count=1000).messages] for q in range(3)}
    assert after[0] == before[0] and after[2] == before[2]
    assert after[1] == before[1][:5] + before[1][6:]  # the damaged one is skipped, the rest kept
    # queue offsets did not move: new messages continue the sequence
    assert again.put_messages([msg(queue_id=1)]).entries[0].queue_offset == len(before[1])


def test_truncated_segment_is_reported_with_what_was_dropped(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store)
    before = _read_all(store)
    root = store.config.store_dir
    end = store.max_physical_offset
    store.shutdown()
    segment = sorted((root / "commitlog").iterdir())[-1]
    cut = (end - int(segment.name)) // 2
    with open(segment, "r+b") as f:
        f.truncate(cut)  # a file cut short (copy gone wrong, disk trouble)
    again = make_store()
    report = again.recovery_report
    assert report["truncated_at"] is not None and int(report["truncated_at"]) <= int(segment.name) + cut
    assert int(report["dropped_bytes"]) > 0 and "checkpoint" in str(report["truncation_reason"])
    after = _read_all(again)
    for qid, bodies in after.items():  # what is left is a prefix of what was there
        assert bodies == before[qid][: len(bodies)]
    assert sum(map(len, after.values())) < sum(map(len, before.values()))


def _index_flushes(store: MessageStore) -> list[int]:
    """Records each IndexFile flush of ``store`` (the dispatched offset at the time)."""
    flushes: list[int] = []
    original = store.index.flush

    def spy() -> None:
        flushes.append(store.dispatcher.dispatched_offset)
        original()

    store.index.flush = spy  # type: ignore[method-assign]
    return flushes


def test_the_index_is_flushed_on_its_own_interval_and_at_shutdown(make_store: StoreFactory) -> None:
    store = make_store(flush_index_interval_ms=100_000)
    flushes = _index_flushes(store)
    _fill(store, 60)
    store.checkpoint()  # the first one flushes the index: nothing of it was flushed yet
    _fill(store, 60)
    store.checkpoint()
    store.checkpoint()
    assert len(flushes) == 1
    store.config.flush_index_interval_ms = 0
    store.checkpoint()
    assert len(flushes) == 2
    _fill(store, 6)
    store.config.flush_index_interval_ms = 100_000
    store.shutdown()  # flushes everything
    assert flushes[-1] == store.dispatcher.dispatched_offset and len(flushes) == 3


def test_a_crash_losing_unflushed_index_pages_re_indexes_them(make_store: StoreFactory) -> None:
    """The checkpoint's DISPATCH OFFSET is the older of what the ConsumeQueues and the IndexFiles hold
    fsynced: index pages written since the index's last flush may be lost with the machine (here the
    index files are put back as they were at that flush), and recovery indexes those records again."""
    store = make_store(flush_index_interval_ms=100_000, recovery_verify_bytes=0)
    root = store.config.store_dir
    _fill(store, 60)
    store.checkpoint()  # the index is flushed here ...
    indexed = store.dispatcher.dispatched_offset
    saved = {p.name: p.read_bytes() for p in (root / "index").iterdir()}
    bodies = [f"late{i}".encode() for i in range(60)]
    for i in range(0, 60, 6):
        batch = [msg(queue_id=j % 3, body=b, KEYS=f"late{i + j}") for j, b in enumerate(bodies[i : i + 6])]
        assert store.put_messages(batch).status is PutMessageStatus.PUT_OK
    store.checkpoint()  # ... and not here: the ConsumeQueues and the CommitLog are
    checkpoint = StoreCheckpoint.load(root / "checkpoint")
    assert checkpoint is not None and checkpoint.dispatch_offset == indexed
    assert store.dispatcher.dispatched_offset > indexed
    _crash(store)
    for name, data in saved.items():
        (root / "index" / name).write_bytes(data)
    again = make_store(flush_index_interval_ms=100_000, recovery_verify_bytes=0)
    for i in (0, 31, 59):
        assert [m.body for m in again.query_messages_by_key("ns%t", f"late{i}")] == [bodies[i]]
    assert [m.body for m in again.query_messages_by_key("ns%t", "k7")] == [f"m{7}".encode() * 8]


def test_after_a_truncation_the_index_counts_as_flushed_only_up_to_the_cut(make_store: StoreFactory) -> None:
    store = make_store(flush_index_interval_ms=100_000)
    _fill(store, 60)
    store.checkpoint()  # the index is flushed up to the end
    offsets = sorted(
        m.physical_offset for q in range(3) for m in store.get_messages("ns%t", q, 0, 100).messages
    )
    cut = offsets[30]
    store.truncate_to(cut)  # as an HA replica does to follow a new master
    assert store.put_messages([msg(body=b"again", KEYS="again")]).status is PutMessageStatus.PUT_OK
    store.checkpoint()
    checkpoint = StoreCheckpoint.load(store.config.store_dir / "checkpoint")
    assert checkpoint is not None and checkpoint.dispatch_offset == cut  # not past the unflushed key
