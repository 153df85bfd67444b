"""The compiled run of StoreReader.get_messages (``read_run`` in ``_record_codec.c``): the same
answers as the Python loop it stands in for, and a stop short of anything unusual, which the loop
then handles."""

from __future__ import annotations

import os
import zlib

import pytest

import dataplane.store.reader as reader
from dataplane.store import MessageStore
from dataplane.store.consume_queue import CQ_ENTRY
from dataplane.store.message import GetResult, StoredMessage
from dataplane.store.record import HEADER_SIZE, compiled_read_run
from tests.unit.store.conftest import StoreFactory, msg

pytestmark = pytest.mark.skipif(compiled_read_run is None, reason="the C extension is not built")


def _shape(result: GetResult) -> tuple[object, ...]:
    messages = result.messages
    return (
        result.status,
        [(m.topic, m.queue_id, m.queue_offset, m.physical_offset, m.body, m.properties) for m in messages],
        result.next_begin_offset,
        result.min_offset,
        result.max_offset,
    )


def _both(
    store: MessageStore,
    monkeypatch: pytest.MonkeyPatch,
    topic: str,
    qid: int,
    offset: int,
    max_count: int = 32,
    max_bytes: int = 4 << 20,
    whole_run: bool = False,
    tag_filter: set[str] | None = None,
) -> GetResult:
    """get_messages with the compiled run, checked against the Python loop alone; with ``whole_run``,
    every entry looked at was read by the compiled run (the reader does call it, and the loop reads
    no record itself)."""
    taken: list[int] = []
    run = reader.compiled_read_run
    assert run is not None
    log = store.commit_log
    loop_reads: list[int] = []

    def counted(*args: object) -> tuple[int, int]:
        result = run(*args)
        taken.append(result[0])
        return result

    def read_message(physical_offset: int) -> StoredMessage:
        loop_reads.append(physical_offset)
        return type(log).read_message(log, physical_offset)

    kw = {"max_count": max_count, "max_bytes": max_bytes, "tag_filter": tag_filter}
    with monkeypatch.context() as m:
        m.setattr(reader, "compiled_read_run", counted)
        m.setattr(log, "read_message", read_message)
        compiled = store.get_messages(topic, qid, offset, **kw)  # type: ignore[arg-type]
    if whole_run:
        looked_at = max(compiled.next_begin_offset - offset, 0)
        assert sum(taken) == looked_at and not loop_reads, (taken, loop_reads)
    with monkeypatch.context() as m:
        m.setattr(reader, "compiled_read_run", None)
        python = store.get_messages(topic, qid, offset, **kw)  # type: ignore[arg-type]
    assert _shape(compiled) == _shape(python)
    return compiled


def _fill(store: MessageStore, count: int) -> None:
    # 1 KiB bodies in 16 KiB segments: runs cross segment ends; two queues interleaved
    for i in range(count):
        store.put_messages([msg("ns%t", i % 2, os.urandom(1000), KEYS=f"k{i}")])


@pytest.mark.parametrize(
    ("offset", "kw"),
    [
        (0, {}),
        (0, {"max_count": 64}),
        (5, {"max_count": 7}),
        (3, {"max_count": 64, "max_bytes": 5000}),
        (0, {"max_count": 64, "max_bytes": 10}),  # one message at least
        (59, {}),
        (60, {}),
        (61, {}),
    ],
)
def test_the_compiled_run_answers_as_the_loop(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, offset: int, kw: dict[str, int]
) -> None:
    store = make_store()
    _fill(store, 120)
    assert len(store.commit_log.queue.files) > 4
    _both(store, monkeypatch, "ns%t", 0, offset, whole_run=True, **kw)
    _both(store, monkeypatch, "ns%t", 1, offset, whole_run=True, **kw)


def test_a_run_stops_short_of_what_the_loop_must_judge(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()  # check_crc_on_read
    _fill(store, 20)
    cq = store.consume_queues.find("ns%t", 0)
    assert cq is not None
    log = store.commit_log
    raw = cq.entries(0, 10)
    # given: the body of queue offset 4 damaged (its CRC no longer matches)
    phys4, _, _ = CQ_ENTRY.unpack_from(raw, 4 * CQ_ENTRY.size)
    mf = log.queue.find(phys4)
    assert mf is not None
    at = phys4 - mf.file_from_offset + HEADER_SIZE
    fd = os.open(mf.path, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes([mf.mm[at] ^ 0xFF]), at)
    finally:
        os.close(fd)
    messages: list[StoredMessage] = []
    args = (raw, log.queue.files, log.file_size, True, log.corrupt_offsets, "ns%t", 0, 0, 32, 4 << 20, 0)
    taken, total = compiled_read_run(*args, messages, StoredMessage)  # type: ignore[misc]
    # then: the run takes offsets 0-3 and stops before the damaged one
    assert taken == 4 and [m.queue_offset for m in messages] == [0, 1, 2, 3]
    assert total == sum(m.size for m in messages)
    # and the reader, going on in Python from there, skips it as before: offsets 5-9 come next
    result = _both(store, monkeypatch, "ns%t", 0, 0, max_count=10)  # 10 entries looked at
    assert [m.queue_offset for m in result.messages] == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    # an entry of another queue's record, and an empty entry, stop it too
    other = store.consume_queues.find("ns%t", 1)
    assert other is not None
    for bad in (other.entries(0, 1), CQ_ENTRY.pack(0, 0, 0)):
        messages = []
        spliced = raw[: 2 * CQ_ENTRY.size] + bad + raw[3 * CQ_ENTRY.size :]
        taken, _ = compiled_read_run(spliced, *args[1:], messages, StoredMessage)  # type: ignore[misc]
        assert taken == 2 and [m.queue_offset for m in messages] == [0, 1]


def test_a_run_over_a_deleted_segment_is_answered_by_the_loop(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(check_crc_on_read=False)
    _fill(store, 120)
    log = store.commit_log
    first = log.queue.files[0]
    # given: the first segment deleted as retention deletes it
    with log.queue.lock:
        log.queue.files.pop(0)
    first.destroy()
    # then: both paths skip the entries of the deleted segment and read on from the next one
    result = _both(store, monkeypatch, "ns%t", 0, 0, max_count=8)  # 8 entries looked at
    assert result.messages and result.messages[0].queue_offset > 0
    assert min(m.physical_offset for m in result.messages) >= log.queue.files[0].file_from_offset
    later = _both(store, monkeypatch, "ns%t", 0, result.next_begin_offset, max_count=8)
    assert len(later.messages) == 8


# Two tags with one CRC32: their ConsumeQueue entries carry the same tag hash, so a filter on one
# passes the other's entries by hash and must drop their records by the exact tag.
COLLIDING = ("tag29685295", "tag32060020")


@pytest.mark.parametrize(
    ("tags", "kw"),
    [
        ({"a"}, {}),
        ({"a", "b"}, {"max_count": 64}),
        ({"b"}, {"max_count": 5}),
        ({"a", "c"}, {"max_count": 64, "max_bytes": 5000}),
        ({"nothing"}, {}),
        ({COLLIDING[0]}, {"max_count": 64}),
        ({"*"}, {}),
    ],
)
def test_a_filtered_run_answers_as_the_loop(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, tags: set[str], kw: dict[str, int]
) -> None:
    assert zlib.crc32(COLLIDING[0].encode()) == zlib.crc32(COLLIDING[1].encode())
    store = make_store()
    names = ["a", "b", "c", *COLLIDING]
    for i in range(150):  # every queue holds every tag, in runs of 1-3, and some untagged
        props = {"TAGS": names[(i // 3 + i) % len(names)]} if i % 11 else {}
        store.put_messages([msg("ns%t", i % 2, os.urandom(900), **props)])
    for qid in (0, 1):
        for offset in (0, 7, 40):
            result = _both(store, monkeypatch, "ns%t", qid, offset, whole_run=True, tag_filter=tags, **kw)
            if "*" not in tags:
                assert all(m.properties.get("TAGS") in tags for m in result.messages)
    # the colliding tag's records were passed over by the exact tag, and the filter still finds its own
    found = _both(store, monkeypatch, "ns%t", 0, 0, max_count=64, tag_filter={COLLIDING[0]})
    assert found.messages and {m.properties["TAGS"] for m in found.messages} == {COLLIDING[0]}
