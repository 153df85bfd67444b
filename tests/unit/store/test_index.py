"""IndexFile lookups by key and by message id, including hash collisions and time ranges."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.store.index_file import INDEX_HEADER, IndexFile
from dataplane.store.index_service import index_items_python
from dataplane.store.record import compiled_index_items, compiled_index_newest_slot, compiled_index_put_keys
from tests.unit.store.conftest import StoreFactory, msg


def test_collisions_are_filtered_on_read(make_store: StoreFactory) -> None:
    # one hash slot: every key collides, the chain is shared by all of them
    store = make_store(index_hash_slot_num=1)
    store.put_messages([msg(body=bytes([i]), KEYS=f"key{i} shared") for i in range(50)])
    for i in (0, 17, 49):
        found = store.query_messages_by_key("ns%t", f"key{i}")
        assert [m.body for m in found] == [bytes([i])]
    assert len(store.query_messages_by_key("ns%t", "shared", max_num=100)) == 50
    assert len(store.query_messages_by_key("ns%t", "shared", max_num=7)) == 7
    assert store.query_messages_by_key("ns%t", "absent") == []
    assert store.query_messages_by_key("other%topic", "key1") == []


def test_several_keys_and_uniq_key(make_store: StoreFactory) -> None:
    store = make_store()
    result = store.put_messages([msg(body=b"a", KEYS="order-1 user-9", UNIQ_KEY="C0FFEE")])
    assert [m.body for m in store.query_messages_by_key("ns%t", "user-9")] == [b"a"]
    assert [m.body for m in store.query_messages_by_key("ns%t", "order-1")] == [b"a"]
    found = store.look_message_by_id("C0FFEE")
    assert found is not None and found.body == b"a"
    assert store.look_message_by_id(result.entries[0].msg_id) == found
    assert store.look_message_by_id("00" * 16) is None


def test_time_range(make_store: StoreFactory) -> None:
    store = make_store()
    ts = store.put_messages([msg(KEYS="k")]).entries[0].store_timestamp
    assert len(store.query_messages_by_key("ns%t", "k", begin_ms=ts, end_ms=ts)) == 1
    assert store.query_messages_by_key("ns%t", "k", begin_ms=ts + 5000, end_ms=ts + 9000) == []
    assert store.query_messages_by_key("ns%t", "k", begin_ms=0, end_ms=ts - 5000) == []


def test_index_rolls_over_when_full(make_store: StoreFactory) -> None:
    store = make_store(index_max_num=10)
    store.put_messages([msg(body=bytes([i]), KEYS=f"k{i}") for i in range(35)])
    assert len(store.index.files) >= 4
    assert [m.body for m in store.query_messages_by_key("ns%t", "k3")] == [bytes([3])]
    assert [m.body for m in store.query_messages_by_key("ns%t", "k34")] == [bytes([34])]


def test_chain_never_loops_over_stale_bytes(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / f"{0:020d}", 4, 20)
    try:
        for i in range(10):
            assert f.put_key("k", i * 100, 1_000)
        # a crash left a slot pointing forward of the count: the reader must not follow it
        f.index_count = 3
        assert set(f.select("k", 100, 0, 10_000)) <= {0, 100, 200}
        f.index_count = 11
        assert f.select("k", 100, 0, 10_000) == [900, 800, 700, 600, 500, 400, 300, 200, 100, 0]
    finally:
        f.close()


def test_a_batch_of_keys_writes_the_header_a_reopened_file_reads(tmp_path: Path) -> None:
    # given a batch of keys put in one call, two of them in the same slot, the file filling up
    path = tmp_path / f"{0:020d}"
    f = IndexFile(path, 4, 5)
    items = [("a", 10), ("b", 20), ("a", 30), ("c", 40), ("d", 50), ("e", 60), ("f", 70)]
    try:
        # when
        added = f.put_keys(items, 1, 2_000)
        # then the keys from ``start`` went in until the file was full
        assert added == 5 and f.is_full
        assert f.select("a", 10, 0, 10_000) == [30]
        assert f.put_keys(items, 6, 2_000) == 0
    finally:
        f.close()
    reopened = IndexFile(path, 4, 5)
    try:
        assert (reopened.index_count, reopened.end_phy_offset, reopened.end_timestamp) == (6, 60, 2_000)
        assert reopened.hash_slot_count == f.hash_slot_count
        assert reopened.select("e", 10, 0, 10_000) == [60]
        assert reopened.select("b", 10, 0, 10_000) == [20]
    finally:
        reopened.close()


def _written(path: Path, batches: list[tuple[list[tuple[str, int]], int]], compiled: bool) -> bytes:
    """The bytes of an index file after ``put_keys`` of each (items, start), one form of the loop."""
    path.parent.mkdir()
    f = IndexFile(path, 64, 330)
    try:
        for items, start in batches:
            if compiled:
                f.put_keys(items, start, 5_000)
            else:
                with patch("dataplane.store.index_file.compiled_index_put_keys", None):
                    f.put_keys(items, start, 5_000)
        f.flush()
        return path.read_bytes()
    finally:
        f.close()


def test_the_compiled_loop_writes_what_the_python_loop_writes(tmp_path: Path) -> None:
    assert compiled_index_put_keys is not None, "the C extension is not built: run scripts/build_ext.py"
    # many keys on 64 slots (chains), non-ASCII keys, a start inside a batch, the file filling up
    keys = [f"topic#key-{i}" for i in range(300)] + ["#ÿ-ünïcode-€", "t#日本語", "#" + "x" * 300]
    items = [(key, 1_000 + 40 * i) for i, key in enumerate(keys)]
    batches = [(items[:120], 0), (items, 120), (items[250:], 3), (items, 290)]
    name = f"{1_000:020d}"
    expected = _written(tmp_path / "python" / name, batches, compiled=False)
    assert _written(tmp_path / "compiled" / name, batches, compiled=True) == expected
    reopened = IndexFile(tmp_path / "compiled" / name, 64, 330)
    try:
        assert reopened.is_full  # 366 keys offered, 330 taken
        assert set(reopened.select("t#日本語", 10, 0, 10_000)) == {1_000 + 40 * keys.index("t#日本語")}
        assert reopened.select("topic#key-7", 10, 0, 10_000) == [1_000 + 40 * 7]
    finally:
        reopened.close()


def test_the_compiled_loop_refuses_bad_items(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / f"{0:020d}", 4, 20)
    try:
        with pytest.raises(TypeError, match="items are"):
            f.put_keys([("a", 1), (b"b", 2)], 0, 1_000)  # type: ignore[list-item]
        assert f.index_count == 1  # the header was not moved: nothing is visible
        assert f.select("a", 10, 0, 10_000) == []
    finally:
        f.close()


_PIECES = ["a", "b", "ключ", " ", "\t", "\u2003", "#", "\n"]
_WORDS = st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["orders", "acme%orders", "тема"]),
            st.none() | _WORDS,
            st.none() | st.text(max_size=6),
            st.integers(0, 2**62),
        ),
        max_size=8,
    )
)
def test_compiled_index_items_are_the_python_ones(
    requests: list[tuple[str, str | None, str | None, int]],
) -> None:
    assert compiled_index_items is not None, "the store's C extension is not built: run scripts/build_ext.py"
    assert compiled_index_items(requests) == index_items_python(requests)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_hash_slots_live_in_memory_and_reach_the_file_at_a_flush(tmp_path: Path, compiled: bool) -> None:
    """Nothing is written through the file's mapping (read-only: a page written through it costs a
    TLB shootdown at each flush); the slots changed since the last flush are written by ``flush``,
    and a crash after it (no close) keeps every key added before it findable, its chains whole."""
    path = tmp_path / f"{0:020d}"
    f = IndexFile(path, 4096, 1000)
    loop = compiled_index_put_keys if compiled else None
    with patch("dataplane.store.index_file.compiled_index_put_keys", loop):
        f.put_keys([(f"k{i}", i * 10) for i in range(100)], 0, 1_000)
        with pytest.raises(TypeError):
            f.file.mm[0:4] = b"\0\0\0\0"  # a read-only mapping
        f.flush()
        assert path.stat().st_blocks * 512 < 256 << 10  # the changed pages, not 16 KiB of slots each
        f.put_keys([(f"k{i}", i * 10) for i in range(100, 150)], 0, 1_000)
        assert f.select("k120", 10, 0, 10_000) == [1200]
    f.file.close()  # a crash: the slots of the last 50 keys were never written
    reopened = IndexFile(path, 4096, 1000)
    try:
        assert reopened.index_count == 101  # the header as the flush wrote it
        assert all(reopened.select(f"k{i}", 10, 0, 10_000) == [i * 10] for i in range(100))
        assert reopened.select("k120", 10, 0, 10_000) == []  # recovery indexes it again
        reopened.put_keys([("k3", 99_999)], 0, 1_000)
        assert reopened.select("k3", 10, 0, 10_000) == [99_999, 30]
    finally:
        reopened.close()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_a_file_reopened_for_writing_numbers_past_every_slot(tmp_path: Path, compiled: bool) -> None:
    """A flush copies slots that may be newer than the header it writes: a crash between them leaves
    slots pointing past INDEX COUNT. Reopened, the file numbers its next entry past them, so the
    entries they point at are not overwritten (the newest slot found by compiled code, or by the
    Python fallback)."""
    path = tmp_path / f"{0:020d}"
    f = IndexFile(path, 16, 1000)
    f.put_keys([(f"k{i}", i * 10) for i in range(20)], 0, 1_000)
    f.flush()
    f.put_keys([(f"k{i}", i * 10) for i in range(20, 40)], 0, 1_000)
    table = f.slot_table
    assert table is not None
    f.write_entries()
    f.file.write(INDEX_HEADER.size, bytes(table))  # the entries and slots went to disk, the header did not
    f.file.close()
    reopened = IndexFile(path, 16, 1000)
    try:
        assert reopened.index_count == 21
        newest = compiled_index_newest_slot if compiled else None
        with patch("dataplane.store.index_file.compiled_index_newest_slot", newest):
            reopened.put_keys([("new", 99_999)], 0, 1_000)
        assert reopened.index_count == 42  # past entry 40, the newest a slot points at
        assert all(reopened.select(f"k{i}", 10, 0, 10_000) == [i * 10] for i in range(40))
        assert reopened.select("new", 10, 0, 10_000) == [99_999]
    finally:
        reopened.close()


def test_a_failed_index_write_loses_keys_not_messages(make_store: StoreFactory) -> None:
    """An index write that fails (ENOSPC past the store's disk guard) leaves the put stored and
    readable; only its keys are not found, and the next put's keys are."""
    store = make_store()
    with patch("dataplane.store.index_file.IndexFile.put_keys", side_effect=OSError(28, "No space left")):
        result = store.put_messages([msg(body=b"lost-key", KEYS="k1")])
    assert result.ok and [m.body for m in store.get_messages("ns%t", 0, 0).messages] == [b"lost-key"]
    assert store.query_messages_by_key("ns%t", "k1") == []
    store.put_messages([msg(body=b"found", KEYS="k2")])
    assert [m.body for m in store.query_messages_by_key("ns%t", "k2")] == [b"found"]


def test_a_key_costs_no_write_until_its_entries_fill_a_run(tmp_path: Path) -> None:
    """A put keeps its entries in memory, where lookups find them; the file gets them in one write
    once 64 KiB of them are waiting (or at a flush), and a reopened file finds them there."""
    path = tmp_path / f"{0:020d}"
    f = IndexFile(path, 4096, 10_000)
    writes: list[int] = []
    write = f.file.write
    with patch.object(
        f.file, "write", side_effect=lambda at, data: (writes.append(len(data)), write(at, data))
    ):
        for i in range(3_000):
            f.put_keys([(f"k{i}", i * 10)], 0, 1_000)
        assert writes == []  # 3,000 keys: 60,000 bytes of entries, none written yet
        assert f.select("k7", 10, 0, 10_000) == [70] and f.select("k2999", 10, 0, 10_000) == [29_990]
        for i in range(3_000, 3_400):
            f.put_keys([(f"k{i}", i * 10)], 0, 1_000)
        assert writes == [3_277 * 20]  # one write, at the put that took the tail past 64 KiB
        assert all(f.select(f"k{i}", 10, 0, 10_000) == [i * 10] for i in range(0, 3_400, 97))
    f.close()
    reopened = IndexFile(path, 4096, 10_000)
    try:
        assert reopened.index_count == 3_401
        assert all(reopened.select(f"k{i}", 10, 0, 10_000) == [i * 10] for i in range(3_400))
    finally:
        reopened.close()


def test_a_put_during_a_flush_never_leaves_a_slot_on_disk_without_its_entry(tmp_path: Path) -> None:
    """The flush writes the entries in memory, then copies a run of slot pages, under the file's lock,
    and writes the copy after letting the lock go: a put racing the write does not wait for it (the
    event loop's puts used to queue behind every run of a flush), and after a crash (the process
    killed: what was written stays) every slot on disk names an entry on disk, and every chain reaches
    the keys before it."""
    path = tmp_path / f"{0:020d}"
    f = IndexFile(path, 64, 10_000)
    f.put_keys([(f"old{i}", i) for i in range(200)], 0, 1_000)  # chains of ~3 keys per slot
    write = f.file.write
    racer: list[threading.Thread] = []
    waited: list[bool] = []

    def put_new() -> None:
        f.put_keys([(f"new{i}", 10_000 + i) for i in range(64)], 0, 1_000)  # a key in every slot

    def slow_write(at: int, data: bytes | memoryview) -> None:
        if at == INDEX_HEADER.size and not racer:  # the first run of slot pages being written
            racer.append(threading.Thread(target=put_new))
            racer[0].start()
            racer[0].join(0.2)
            waited.append(racer[0].is_alive())  # whether the put waits for the write
        write(at, data)

    with patch.object(f.file, "write", side_effect=slow_write):
        f.flush()
    racer[0].join(5)
    assert waited == [False]
    assert f.select("new5", 10, 0, 10_000) == [10_005]
    # The crash: the slots of the racing put may be on disk (copied by a later run), its entries
    # must be too; what is on disk is all a reopened file has.
    f.file.close()
    reopened = IndexFile(path, 64, 10_000)
    try:
        assert reopened.index_count == 201  # the header as the flush began
        assert all(reopened.select(f"old{i}", 10, 0, 10_000) == [i] for i in range(200))
    finally:
        reopened.close()


# Run in a process of its own: RLIMIT_FSIZE makes a write past ``limit`` bytes of the file short, then
# fail (EFBIG), as a full disk would; the limit must not reach the test runner's other writes.
_WRITE_FAILS = """
import json, resource, signal, sys
from pathlib import Path
from unittest.mock import patch
from dataplane.store.index_file import IndexFile
from dataplane.store.record import compiled_index_put_keys

path, compiled, limit = Path(sys.argv[1]), sys.argv[2] == "compiled", int(sys.argv[3])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
f = IndexFile(path, 4096, 10_000)  # the file has its full size before the limit is set
loop = compiled_index_put_keys if compiled else None
with patch("dataplane.store.index_file.compiled_index_put_keys", loop):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    for i in range(4_000):  # past 64 KiB of entries: the put tries to write them, and cannot
        f.put_keys([(f"k{i}", i * 10)], 0, 1_000)
    try:
        f.flush()
        error = None
    except OSError as exc:
        error = exc.errno
    found_meanwhile = [f.select(f"k{i}", 10, 0, 10_000) for i in range(0, 4_000, 7)]
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    f.put_keys([(f"n{i}", 100_000 + i) for i in range(50)], 0, 1_000)
    f.flush()
f.file.close()
reopened = IndexFile(path, 4096, 10_000)
print(json.dumps({
    "error": error,
    "found_meanwhile": found_meanwhile,
    "first": [reopened.select(f"k{i}", 10, 0, 10_000) for i in range(4_000)],
    "next": [reopened.select(f"n{i}", 10, 0, 10_000) for i in range(50)],
}))
"""


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_entries_a_full_disk_refused_stay_findable_and_are_written_later(
    tmp_path: Path, compiled: bool
) -> None:
    """A write of the entries in memory that fails (a full disk) loses none of them: lookups find
    them meanwhile, the flush reports the failure, and a flush once there is room writes them."""
    assert compiled_index_put_keys is not None, "the C extension is not built: run scripts/build_ext.py"
    entries_at = INDEX_HEADER.size + 4096 * 4
    limit = entries_at + 20 * 10  # not even the first run of entries fits
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _WRITE_FAILS,
            str(tmp_path / f"{0:020d}"),
            "compiled" if compiled else "python",
            str(limit),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["error"] is not None  # the failure reached the flush's caller
    assert seen["found_meanwhile"] == [[i * 10] for i in range(0, 4_000, 7)]
    assert seen["first"] == [[i * 10] for i in range(4_000)]
    assert seen["next"] == [[100_000 + i] for i in range(50)]


def test_a_file_filled_during_a_flush_keeps_its_slots_until_the_next(tmp_path: Path) -> None:
    """A put that fills the file while a flush runs (here: just before the flush writes the header)
    set slots the flush had already copied past. The flush keeps the slots in memory (the file was
    not full when it began), so the keys are found, and the next flush writes them."""
    path = tmp_path / f"{0:020d}"
    f = IndexFile(path, 64, 100)
    f.put_keys([(f"k{i}", i) for i in range(90)], 0, 1_000)
    write = f.file.write
    filled: list[bool] = []

    def fill_before_the_header(at: int, data: bytes | memoryview) -> None:
        if at == 0 and not filled:  # the header, written without the lock
            filled.append(True)
            f.put_keys([(f"late{i}", 1_000 + i) for i in range(20)], 0, 1_000)  # 10 fit
        write(at, data)

    with patch.object(f.file, "write", side_effect=fill_before_the_header):
        f.flush()
    assert filled and f.is_full
    late = [f.select(f"late{i}", 10, 0, 10_000) for i in range(10)]
    assert late == [[1_000 + i] for i in range(10)]
    f.flush()
    assert f.slot_table is None  # full and flushed: lookups read the file
    assert [f.select(f"late{i}", 10, 0, 10_000) for i in range(10)] == late
    f.close()
    reopened = IndexFile(path, 64, 100)
    try:
        assert [reopened.select(f"late{i}", 10, 0, 10_000) for i in range(10)] == late
        assert all(reopened.select(f"k{i}", 10, 0, 10_000) == [i] for i in range(90))
    finally:
        reopened.close()
