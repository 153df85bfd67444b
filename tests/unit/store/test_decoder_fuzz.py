"""Property-based fuzzing of the store's decoders: ConsumeQueue entries, IndexFile, consumer offsets.

Arbitrary or mutated bytes must give a valid result or a :class:`StoreError`: never another
exception, never a record of another queue or another key, never a loop, and never a change to the
CommitLog (the source of truth) or to a queue that was not touched (issue 3).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dataplane.store import MessageStore
from dataplane.store.consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueue
from dataplane.store.consumer_offsets import ConsumerOffsetManager
from dataplane.store.errors import CorruptRecordError, StoreError
from dataplane.store.index_file import INDEX_ENTRY, INDEX_HEADER, IndexFile
from tests.unit.store.conftest import StoreFactory, msg, small_config

TOPICS = ("ns%a", "ns%b")
QUEUES = (0, 1)
PER_QUEUE = 60  # two ConsumeQueue files of 50 entries per queue
SLOTS, MAX_KEYS = 16, 400
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
# overwrite bytes at (position mod file size)
Mutations = list[tuple[int, bytes]]
mutations = st.lists(
    st.tuples(st.integers(0, 1 << 20), st.binary(min_size=1, max_size=40)), min_size=1, max_size=8
)


class Pristine:
    """A store written once: which body sits at each (topic, queue, offset), and under which key."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bodies: dict[tuple[str, int, int], bytes] = {}
        self.keys: dict[str, tuple[str, bytes]] = {}  # key -> (topic, body)
        self.uniq: dict[str, bytes] = {}
        store = MessageStore(small_config(root, index_hash_slot_num=SLOTS, index_max_num=MAX_KEYS))
        store.start()
        try:
            batch = []
            for i in range(PER_QUEUE * len(TOPICS) * len(QUEUES)):
                topic, qid = TOPICS[i % 2], QUEUES[(i // 2) % 2]
                body = f"{topic}/{qid}/{i}".encode() * (1 + i % 5)
                key, uniq = f"k{i}", f"U{i:08X}"
                batch.append(msg(topic, qid, body, KEYS=f"{key} all", UNIQ_KEY=uniq))
                self.keys[key] = (topic, body)
                self.uniq[uniq] = body
                if len(batch) == 16:
                    self._put(store, batch)
                    batch = []
            self._put(store, batch)
        finally:
            store.shutdown()
        self.commitlog_digest = digest(root / "commitlog")

    def _put(self, store: MessageStore, batch: list[Any]) -> None:
        if not batch:
            return
        result = store.put_messages(batch)
        for m, entry in zip(batch, result.entries, strict=True):
            self.bodies[(m.topic, m.queue_id, entry.queue_offset)] = m.body

    def copy(self) -> Path:
        target = Path(tempfile.mkdtemp(prefix="fuzz-store-")) / "store"
        shutil.copytree(self.root, target)
        (target / "lock").unlink(missing_ok=True)
        return target


def digest(directory: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(directory.iterdir()):
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def mutate(path: Path, changes: Mutations) -> None:
    """Overwrite bytes in place (through the file, so a running store's mapping sees them too)."""
    size = path.stat().st_size
    fd = os.open(path, os.O_WRONLY)
    try:
        for position, data in changes:
            at = position % size
            os.pwrite(fd, data[: size - at], at)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    return Pristine(tmp_path_factory.mktemp("pristine") / "store")


@pytest.fixture
def stores() -> Iterator[list[MessageStore]]:
    opened: list[MessageStore] = []
    yield opened
    for store in opened:
        store.shutdown()


def start(root: Path, opened: list[MessageStore], **overrides: Any) -> MessageStore | None:
    """A started store, or None when starting refused the data with a StoreError."""
    store = MessageStore(small_config(root, index_hash_slot_num=SLOTS, index_max_num=MAX_KEYS, **overrides))
    try:
        store.start()
    except StoreError:
        return None
    opened.append(store)
    return store


def read_queue(store: MessageStore, pristine: Pristine, topic: str, qid: int) -> dict[int, bytes]:
    """Every message a consumer reaches, offset by offset; each must be the one stored there."""
    got: dict[int, bytes] = {}
    offset = store.get_min_offset_in_queue(topic, qid)
    end = store.get_max_offset_in_queue(topic, qid)
    assert 0 <= offset <= end
    steps = 0
    while offset < end:
        steps += 1
        assert steps <= 10 * PER_QUEUE, "the read loop does not advance"
        try:
            result = store.get_messages(topic, qid, offset, max_count=7)
        except StoreError:
            offset += 1
            continue
        for m in result.messages:
            # never another queue's record, nor one from another offset
            assert (m.topic, m.queue_id) == (topic, qid)
            assert pristine.bodies.get((topic, qid, m.queue_offset)) == m.body
            got[m.queue_offset] = m.body
        offset = max(result.next_begin_offset, offset + 1)
        # the per-offset helpers take the same bytes
        store.get_store_time(topic, qid, offset)
    store.get_offset_in_queue_by_time(topic, qid, 0)
    store.get_offset_in_queue_by_time(topic, qid, 1 << 62)
    return got


def expected(pristine: Pristine, topic: str, qid: int) -> dict[int, bytes]:
    return {o: b for (t, q, o), b in pristine.bodies.items() if (t, q) == (topic, qid)}


def cq_files(root: Path) -> list[Path]:
    return sorted((root / "consumequeue").glob("*/*/*"))


def crafted_entries() -> st.SearchStrategy[Mutations]:
    """Whole 20-byte entries with plausible or hostile values, at entry boundaries."""
    entry = st.tuples(
        st.one_of(INT64, st.integers(0, 1 << 16)),  # COMMITLOG OFFSET: anywhere, or inside the log
        st.one_of(INT32, st.integers(0, 4096)),  # SIZE
        INT64,  # TAG HASH
    )
    return st.lists(
        st.tuples(
            st.integers(0, 49).map(lambda n: n * CQ_ENTRY_SIZE), entry.map(lambda e: CQ_ENTRY.pack(*e))
        ),
        min_size=1,
        max_size=6,
    )


#
# ConsumeQueue
#


@FUZZ
@given(data=st.data(), changes=st.one_of(mutations, crafted_entries()), verify=st.booleans())
def test_consume_queue_entries_fuzz(
    pristine: Pristine, stores: list[MessageStore], data: st.DataObject, changes: Mutations, verify: bool
) -> None:
    root = pristine.copy()
    try:
        target = data.draw(st.sampled_from(cq_files(root)), label="file")
        topic, qid = target.parent.parent.name, int(target.parent.name)
        store = start(root, stores, recovery_verify_bytes=0)
        assert store is not None

        # when: entries change under a running store
        mutate(target, changes)
        # then: every read is a stored record of that queue at that offset, or nothing
        for t in TOPICS:
            for q in QUEUES:
                got = read_queue(store, pristine, t, q)
                if (t, q) != (topic, qid):
                    assert got == expected(pristine, t, q)  # the other queues lose nothing
        store.shutdown()
        stores.remove(store)
        assert digest(root / "commitlog") == pristine.commitlog_digest

        # and a restart over the corrupt file (trusting the checkpoint, or re-verifying the log)
        (root / "lock").unlink(missing_ok=True)
        store = start(root, stores, recovery_verify_bytes=(256 << 20) if verify else 0)
        if store is not None:
            for t in TOPICS:
                for q in QUEUES:
                    got = read_queue(store, pristine, t, q)
                    if verify or (t, q) != (topic, qid):
                        # re-dispatched from the CommitLog: nothing lost at all
                        assert got == expected(pristine, t, q)
    finally:
        for store in list(stores):
            store.shutdown()
            stores.remove(store)
        shutil.rmtree(root.parent, ignore_errors=True)


@FUZZ
@given(raw=st.binary(max_size=4 * 50 * CQ_ENTRY_SIZE), entries_per_file=st.sampled_from([1, 7, 50]))
def test_consume_queue_load_of_arbitrary_files(raw: bytes, entries_per_file: int) -> None:
    """A queue directory holding arbitrary bytes: load() and every lookup answer, or StoreError."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "q"
        directory.mkdir()
        file_size = entries_per_file * CQ_ENTRY_SIZE
        for n, start in enumerate(range(0, max(len(raw), 1), file_size)):
            (directory / f"{n * file_size:020d}").write_bytes(raw[start : start + file_size])
        cq = ConsumeQueue(directory, "ns%t", 0, entries_per_file)
        try:
            try:
                cq.load()
            except StoreError:
                return
            assert 0 <= cq.min_offset <= cq.max_offset
            for offset in range(cq.min_offset - 1, cq.max_offset + 2):
                entry = cq.entry(offset)
                assert entry is None or len(entry) == 3
                assert len(cq.entries(offset, 5)) % CQ_ENTRY_SIZE == 0
            found = cq.first_offset_at_or_after(1 << 20, cq.min_offset, cq.max_offset)
            assert cq.min_offset <= found <= cq.max_offset
            assert cq.min_offset <= cq.offset_by_time(1, lambda phys: phys) <= cq.max_offset
        finally:
            cq.close()


#
# IndexFile
#


def index_files(root: Path) -> list[Path]:
    return sorted((root / "index").iterdir())


def crafted_index() -> st.SearchStrategy[Mutations]:
    """Hostile header fields, slot heads and chain entries at their real positions."""
    entries_at = INDEX_HEADER.size + SLOTS * 4
    header = st.tuples(INT64, INT64, INT64, INT64, INT32, INT32).map(lambda h: (0, INDEX_HEADER.pack(*h)))
    slot = st.tuples(st.integers(0, SLOTS - 1), st.one_of(INT32, st.integers(0, MAX_KEYS + 2))).map(
        lambda s: (INDEX_HEADER.size + s[0] * 4, struct.pack(">i", s[1]))
    )
    entry = st.tuples(
        st.integers(0, MAX_KEYS), INT32, st.one_of(INT64, st.integers(0, 1 << 16)), INT32, INT32
    ).map(lambda e: (entries_at + e[0] * INDEX_ENTRY.size, INDEX_ENTRY.pack(*e[1:])))
    return st.lists(st.one_of(header, slot, entry), min_size=1, max_size=8)


@FUZZ
@given(data=st.data(), changes=st.one_of(mutations, crafted_index()), restart=st.booleans())
def test_index_file_fuzz(
    pristine: Pristine, stores: list[MessageStore], data: st.DataObject, changes: Mutations, restart: bool
) -> None:
    root = pristine.copy()
    try:
        target = data.draw(st.sampled_from(index_files(root)), label="file")
        store = start(root, stores, recovery_verify_bytes=0)
        assert store is not None
        mutate(target, changes)
        if restart:  # the header is decoded again when the file is opened
            store.shutdown()
            stores.remove(store)
            (root / "lock").unlink(missing_ok=True)
            store = start(root, stores, recovery_verify_bytes=0)
            if store is None:
                return
        # then: a lookup returns only records that carry the key, within the time range
        for key in ("k0", "k5", "k239", "all", "absent"):
            for topic in TOPICS:
                for m in store.query_messages_by_key(topic, key, max_num=300):
                    assert m.topic == topic and key in m.keys
                    assert key == "all" or pristine.keys[key] == (topic, m.body)
        for uniq in ("U00000000", "U000000EF", "UFFFFFFFF"):
            for m in store.query_messages_by_uniq_key(uniq):
                assert m.uniq_key == uniq and pristine.uniq[uniq] == m.body
            found = store.look_message_by_id(uniq)
            assert found is None or found.body == pristine.uniq[uniq]
        # the index is a lookup aid: the queues still hold every message
        for t in TOPICS:
            for q in QUEUES:
                assert read_queue(store, pristine, t, q) == expected(pristine, t, q)
        # and new messages are still accepted and indexed
        store.put_messages([msg(TOPICS[0], 0, b"after", KEYS="fresh")])
        assert [m.body for m in store.query_messages_by_key(TOPICS[0], "fresh")] == [b"after"]
    finally:
        for store in list(stores):
            store.shutdown()
            stores.remove(store)
        shutil.rmtree(root.parent, ignore_errors=True)


@FUZZ
@given(raw=st.binary(max_size=INDEX_HEADER.size + 8 * 4 + 21 * INDEX_ENTRY.size), key=st.text(max_size=8))
def test_index_file_of_arbitrary_bytes(raw: bytes, key: str) -> None:
    """An index file of arbitrary content (short files are zero-extended): select ends, put works."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{0:020d}"
        path.write_bytes(raw)
        f = IndexFile(path, 8, 20)
        try:
            candidates = f.select(key, 100, -(1 << 62), 1 << 62)
            assert len(candidates) <= 20 and all(isinstance(c, int) for c in candidates)
            if not f.is_full:
                assert f.put_key(key, 4096, 1_700_000_000_000)
                assert 4096 in f.select(key, 100, 1_699_999_999_000, 1_700_000_001_000)
        finally:
            f.close()


#
# Consumer offsets
#

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=16,
)
offset_tables = st.dictionaries(
    st.text(max_size=10), st.dictionaries(st.text(max_size=4), JSON, max_size=4), max_size=4
)


def _load(raw: bytes) -> ConsumerOffsetManager | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "consumerOffset.json"
        path.write_bytes(raw)
        manager = ConsumerOffsetManager(path)
        manager.commit("g-before", "t-before", 0, 7)
        try:
            manager.load()
        except CorruptRecordError as exc:
            assert str(path) in str(exc)  # the message names the file
            assert path.read_bytes() == raw  # a refused file is left as it was
            assert manager.query("g-before", "t-before", 0) == 7  # and the table as it was
            return None
        for (group, topic), queues in manager.snapshot().items():
            assert isinstance(group, str) and isinstance(topic, str)
            assert all(type(q) is int and type(o) is int for q, o in queues.items())
        return manager


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
@example(raw=b"\x80")  # not UTF-8: was an unhandled UnicodeDecodeError
@example(raw=b'{"offsetTable": {"t@g": {"0": 1e400}}}')  # int(inf): was an OverflowError
@example(raw=b"[" * 100_000)  # was a RecursionError
@example(raw=b'{"offsetTable": {"t@g": {"0": 1.9, "1": true, "2": "3", "3": -1}}}')  # was 1, 1, 3, -1
def test_consumer_offsets_arbitrary_bytes(raw: bytes) -> None:
    _load(raw)


@FUZZ
@given(table=offset_tables, wrap=st.booleans(), blob=JSON)
def test_consumer_offsets_arbitrary_json(table: dict[str, Any], wrap: bool, blob: Any) -> None:
    document = {"offsetTable": table} if wrap else blob
    _load(json.dumps(document).encode())


@FUZZ
@given(
    commits=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=12).filter(lambda g: "@" not in g),
            st.text(min_size=1, max_size=12),
            st.integers(0, 2**31 - 1),
            st.integers(0, 2**63 - 1),
        ),
        max_size=12,
    )
)
def test_consumer_offsets_round_trip(commits: list[tuple[str, str, int, int]]) -> None:
    """What was committed is what a restart reads back: no offset lost or moved to another key."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config" / "consumerOffset.json"
        manager = ConsumerOffsetManager(path)
        for group, topic, qid, offset in commits:
            manager.commit(group, topic, qid, offset)
        manager.persist()
        again = ConsumerOffsetManager(path)
        again.load()
        assert again.snapshot() == manager.snapshot()


#
# Regressions: what the fuzzing above found, as plain examples
#


def test_an_entry_pointing_at_another_queues_record_is_skipped(make_store: StoreFactory) -> None:
    store = make_store()
    store.put_messages([msg("ns%a", 0, b"mine"), msg("ns%b", 0, b"theirs"), msg("ns%a", 0, b"mine too")])
    cq = store.consume_queues.find("ns%a", 0)
    other = store.consume_queues.find("ns%b", 0)
    assert cq is not None and other is not None
    # when: entry 0 of ns%a/0 is damaged into a copy of ns%b/0's entry 0 (a valid record elsewhere)
    (cq.queue.files[0].path).write_bytes(other.entries(0, 1) + cq.entries(1, 1))
    # then: the consumer of ns%a/0 never sees "theirs"; the next record of its own comes
    result = store.get_messages("ns%a", 0, 0)
    assert [(m.topic, m.queue_offset, m.body) for m in result.messages] == [("ns%a", 1, b"mine too")]


def test_recovery_rewrites_a_damaged_tail_entry(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store()
    store.put_messages([msg(body=b"first"), msg(body=b"second")])
    path = store.consume_queues.find("ns%t", 0).queue.files[0].path  # type: ignore[union-attr]
    store.shutdown()
    # given: entry 0 reads "offset -1, size 1" (used to survive recovery's truncation, hiding "first")
    mutate(path, [(0, CQ_ENTRY.pack(-1, 1, 0))])
    # when: the store restarts and re-verifies the CommitLog
    store = make_store(recovery_verify_bytes=256 << 20)
    # then: both entries were written again from the CommitLog
    assert [m.body for m in store.get_messages("ns%t", 0, 0).messages] == [b"first", b"second"]


@pytest.mark.parametrize("first_byte", [b"\x40", b"\x80"], ids=["far-future", "negative"])
def test_a_damaged_index_header_keeps_the_index_usable(make_store: StoreFactory, first_byte: bytes) -> None:
    store = make_store()
    store.put_messages([msg(body=b"old", KEYS="old")])
    path = store.index.files[-1].file.path
    store.shutdown()
    # given: BEGIN TIMESTAMP damaged (used to hide every new key, or fail every put with struct.error)
    mutate(path, [(0, first_byte)])
    store = make_store()
    # then: old keys are still found, and new ones go to a new index file and are found too
    assert [m.body for m in store.query_messages_by_key("ns%t", "old")] == [b"old"]
    store.put_messages([msg(body=b"new", KEYS="new")])
    assert [m.body for m in store.query_messages_by_key("ns%t", "new")] == [b"new"]
    assert len(store.index.files) == 2


def test_a_corrupt_offsets_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_bytes(b'{"offsetTable": {"t@g": {"0": 1.5}}}')
    with pytest.raises(CorruptRecordError, match=r"consumerOffset.json: .*offset >= 0, found '0': 1.5"):
        ConsumerOffsetManager(path).load()
