"""Units of issue 5: retry backoff steps, the POP 'waiting' flag across a restart, the trace buffer,
and the redrive log."""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import types
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from dataplane.pop import NONCE, WAITING, PopState
from dataplane.retry import ROCKETMQ_RETRY_DELAYS_MS, retry_delay_ms
from dataplane.services.messages_admin import RedriveLog
from dataplane.store.status import PutMessageStatus
from dataplane.trace import MessageTracer, TraceEvent


@pytest.mark.parametrize(
    ("policy", "attempt", "expected"),
    [
        pytest.param(
            {"exponential": {"initial_ms": 1000, "max_ms": 5000, "multiplier": 2}}, 1, 1000, id="exp-1"
        ),
        pytest.param(
            {"exponential": {"initial_ms": 1000, "max_ms": 5000, "multiplier": 2}}, 3, 4000, id="exp-3"
        ),
        pytest.param(
            {"exponential": {"initial_ms": 1000, "max_ms": 5000, "multiplier": 2}}, 9, 5000, id="exp-cap"
        ),
        pytest.param(
            {"exponential": {"initial_ms": 10, "max_ms": 0, "multiplier": 1e6}}, 400, 86_400_000, id="huge"
        ),
        pytest.param({"customized": {"delays_ms": [100, 200]}}, 1, 100, id="custom-1"),
        pytest.param({"customized": {"delays_ms": [100, 200]}}, 5, 200, id="custom-last-repeats"),
        pytest.param({}, 1, 0, id="none"),
    ],
)
def test_retry_delay(policy: dict[str, Any], attempt: int, expected: int) -> None:
    assert retry_delay_ms(policy, attempt) == expected


def test_default_ladder_is_rocketmqs() -> None:
    assert len(ROCKETMQ_RETRY_DELAYS_MS) == 16
    assert retry_delay_ms({}, 1, ROCKETMQ_RETRY_DELAYS_MS) == 10_000
    assert retry_delay_ms({}, 16, ROCKETMQ_RETRY_DELAYS_MS) == 7_200_000
    assert retry_delay_ms({}, 99, ROCKETMQ_RETRY_DELAYS_MS) == 7_200_000


def _pop(tmp_path: Path) -> PopState:
    return PopState(tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda g, t, q, o: None)


@pytest.mark.parametrize("compact", [False, True], ids=["journal", "snapshot"])
def test_waiting_flag_survives_a_restart(tmp_path: Path, compact: bool) -> None:
    pop = _pop(tmp_path)
    first = pop.deliver("g", "t", 0, 5, 1, 1000, 6)
    pop.deliver("g", "t", 0, 5, 1, 9000, 6, waiting=True, nonce=first[NONCE])
    pop.deliver("g", "t", 0, 7, 2, 2000, 8)
    if compact:
        pop.compact()
    pop._journal.close()  # a crash: no close(), no compaction
    again = _pop(tmp_path)
    pos = again.peek("g", "t", 0)
    assert pos is not None
    waiting = pos.in_flight[5]
    assert waiting == (5, first[NONCE], 1, 9000, True)
    assert pos.in_flight[7][WAITING] is False
    again.close()


class _Store:
    def __init__(self) -> None:
        self.records: list[Any] = []

    def query_messages_by_key(self, topic: str, key: str, max_num: int) -> list[Any]:
        return [r for r in self.records if key in r.properties.get("KEYS", "").split()]

    def put_messages(self, msgs: list[Any]) -> None:
        self.records += msgs


def test_tracer_buffers_batches_and_bounds(tmp_path: Path) -> None:
    store = _Store()
    tracer = MessageTracer(store, max_pending=1000)
    tracer.record("m1", "ns%t", "stored")
    tracer.record("m1", "ns%t", "delivered", group="ns%g", attempt=1, client_id="c")
    tracer.record("m2", "ns%other", "stored")
    # readable before it is written
    assert [e.event for e in tracer.events("m1", "ns%t")] == ["stored", "delivered"]
    tracer.flush()
    assert len(store.records) == 1 and store.records[0].properties["KEYS"] == "m1 m2"
    assert [e.event for e in tracer.events("m1", "ns%t")] == ["stored", "delivered"]
    assert tracer.events("m2", "ns%t") == []  # another topic's message
    for i in range(1150):
        tracer.record(f"x{i}", "ns%t", "stored")
    assert tracer.dropped == 150 and len(tracer.pending_events()) == 1000
    assert tracer.pending_events()[0].message_id == "x150"  # the oldest went
    tracer.flush()
    assert not tracer.pending_events()
    # 1,000 events of as many ids: records of at most 256 ids, each a key once
    written = store.records[1:]
    assert [len(r.properties["KEYS"].split()) for r in written] == [256, 256, 256, 232]
    assert [e.message_id for e in tracer.events("x999", "ns%t")] == ["x999"]


def test_record_many_writes_what_record_writes_per_event() -> None:
    """A receive's deliveries (or an ack's entries) in one call: the same events, kept and written as
    one batch that a trace query reads back event by event."""
    one, many = _Store(), _Store()
    by_one, by_many = MessageTracer(one), MessageTracer(many)
    items = [(f"m{i:02d}", i % 3 + 1) for i in range(40)] + [("", 1)]  # no id: not traced
    for mid, attempt in items:
        by_one.record(mid, "ns%t", "delivered", group="ns%g", attempt=attempt, client_id="c1")
    by_many.record_many(items, "ns%t", "delivered", group="ns%g", client_id="c1")
    assert len(by_many._pending) == 1  # one batch, not one item per message
    pending = by_many.pending_events()
    assert len(pending) == 40 and {e.time_ms for e in pending} == {pending[0].time_ms}
    by_one_pending = by_one.pending_events()
    assert [e._replace(time_ms=0) for e in pending] == [e._replace(time_ms=0) for e in by_one_pending]
    assert pending[0].attempt == 1 and pending[0].detail == ""
    assert [e.attempt for e in by_many.events("m05", "ns%t")] == [3]  # read from the buffer
    for tracer in (by_one, by_many):
        tracer.flush()
    assert [r.properties for r in one.records] == [r.properties for r in many.records]
    (entry,) = json.loads(many.records[0].body)
    assert entry == {
        "ids": [f"m{i:02d}" for i in range(40)],
        "attempts": [i % 3 + 1 for i in range(40)],
        "topic": "ns%t",
        "event": "delivered",
        "time_ms": pending[0].time_ms,
        "group": "ns%g",
        "client_id": "c1",
    }
    assert json.loads(one.records[0].body)[0][:3] == ["m00", "ns%t", "delivered"]  # single events
    for store_ in (one, many):  # read back from the records alike
        tracer = MessageTracer(store_)
        assert [(e.event, e.attempt, e.client_id) for e in tracer.events("m05", "ns%t")] == [
            ("delivered", 3, "c1")
        ]
    assert MessageTracer(many).events("m05", "ns%other") == []


def test_a_batch_larger_than_a_record_is_split_and_a_message_keeps_its_record() -> None:
    store = _Store()
    tracer = MessageTracer(store)
    tracer.record_many([(f"a{i}", 1) for i in range(300)], "ns%t", "delivered", group="ns%g")
    tracer.record_many([(f"a{i}", 1) for i in range(250, 300)], "ns%t", "acked", group="ns%g")
    tracer.flush()
    keys = [r.properties["KEYS"].split() for r in store.records]
    # 256 deliveries alone, then the other 44 with the 50 acks: a message of both records is a key
    # of both, a message whose events share a record is one key of it
    assert [len(k) for k in keys] == [256, 50]
    assert keys[1] == [f"a{i}" for i in range(256, 300)] + [f"a{i}" for i in range(250, 256)]
    for mid in ("a260", "a252"):
        assert [e.event for e in tracer.events(mid, "ns%t")] == ["delivered", "acked"]
    assert [e.event for e in tracer.events("a3", "ns%t")] == ["delivered"]


def test_a_record_the_tracer_cannot_read_is_skipped() -> None:
    store = _Store()
    tracer = MessageTracer(store)
    tracer.record_many([("m1", 1)], "ns%t", "delivered", group="ns%g")
    tracer.flush()
    good = store.records[0]
    for body in (b'[{"ids": ["m1"]}]', b'[{"ids": ["m1"], "attempts": []}]', b"not json", b'[["m1"]]'):
        store.records.insert(0, type(good)(good.topic, 0, body, dict(good.properties)))
    assert [(e.event, e.attempt) for e in tracer.events("m1", "ns%t")] == [("delivered", 1)]


def test_record_many_is_bounded_like_record() -> None:
    store = _Store()
    tracer = MessageTracer(store, max_pending=50)
    tracer.record_many([(f"a{i}", 1) for i in range(30)], "ns%t", "acked", group="ns%g")
    assert tracer.dropped == 0
    tracer.record_many([(f"b{i}", 1) for i in range(30)], "ns%t", "acked", group="ns%g")
    pending = tracer.pending_events()
    assert tracer.dropped == 10 and len(pending) == 50
    assert pending[0].message_id == "a10"  # the oldest went, part of a batch
    tracer.record("s", "ns%t", "stored")
    tracer.record_many([(f"c{i}", 1) for i in range(80)], "ns%t", "acked", group="ns%g")
    pending = tracer.pending_events()
    assert tracer.dropped == 10 + 1 + 80 and len(pending) == 50
    assert pending[0].message_id == "c30" and pending[-1].message_id == "c79"
    off = MessageTracer(store, enabled=False)
    off.record_many([("x", 1)], "ns%t", "acked")
    assert not off.pending_events()


def test_a_message_s_events_of_one_flush_share_a_record() -> None:
    # Four consumers interleave: deliveries of one batch, acks of another. A flush of up to 256 events
    # is one record, so it is indexed once per message it holds.
    store = _Store()
    tracer = MessageTracer(store)
    for i in range(32):
        tracer.record(f"a{i:02d}", "ns%t", "delivered", group="ns%g", attempt=1)
        tracer.record(f"b{i:02d}", "ns%t", "acked", group="ns%g", attempt=1)
    for i in range(32):
        tracer.record(f"a{i:02d}", "ns%t", "acked", group="ns%g", attempt=1)
        tracer.record(f"b{i:02d}", "ns%t", "delivered", group="ns%g", attempt=2)
    tracer.flush()
    keys = [r.properties["KEYS"].split() for r in store.records]
    assert len(store.records) == 1 and sum(map(len, keys)) == 64  # 64 messages, each indexed once
    # and a message's events keep their order
    assert [e.event for e in tracer.events("b05", "ns%t")] == ["acked", "delivered"]


def test_a_record_is_indexed_by_its_ids_without_spaces() -> None:
    # KEYS is space-separated: an id with a space in it would index its halves, so it is left out
    # (its events are still in the record); the other ids of the record keep their one key each.
    store = _Store()
    tracer = MessageTracer(store)
    for mid in ("m1", "bad id", "m2", "m1"):
        tracer.record(mid, "ns%t", "delivered", group="ns%g", attempt=1)
    tracer.flush()
    [record] = store.records
    assert record.properties["KEYS"].split() == ["m1", "m2"]
    assert [e[0] for e in json.loads(record.body)] == ["m1", "bad id", "m2", "m1"]  # as recorded
    tracer.record("only one", "ns%t", "acked", group="ns%g", attempt=1)
    tracer.flush()
    assert "KEYS" not in store.records[-1].properties


def test_stored_event_is_read_from_the_store(tmp_path: Path) -> None:
    """A send writes no trace record: "stored" comes from the message's earliest copy per topic."""
    from dataplane.store import MessageStore, MessageStoreConfig, MessageToStore

    store = MessageStore(MessageStoreConfig(tmp_path / "store", mapped_file_size_commit_log=1 << 20))
    store.start()
    try:
        tracer = MessageTracer(store)

        def put(topic: str, qid: int, mid: str, **props: str) -> int:
            msg = MessageToStore(topic, qid, b"x", {"UNIQ_KEY": mid, **props})
            return int(store.put_messages([msg]).entries[0].store_timestamp)

        at = put("ns%orders", 3, "plain")
        put("ns%orders", 3, "plain")  # the client's resend: still one event, the first
        put("%DLQ%ns%g", 0, "plain")  # a dead-lettered copy is not a send
        delayed_at = put("rmq_sys_wheel_timer", 0, "later", REAL_TOPIC="ns%orders", TIMER_OUT_MS="99")
        put("ns%orders", 1, "later")  # delivered at its time: the same message, not a second send
        put("rmq_sys_trans_half_topic", 0, "tx", REAL_TOPIC="ns%pay")
        tracer.record("plain", "ns%orders", "delivered", group="ns%g", attempt=1)

        events = tracer.events("plain")
        assert [(e.event, e.topic, e.detail) for e in events] == [
            ("stored", "ns%orders", "queue 3"),
            ("delivered", "ns%orders", ""),
        ]
        assert events[0].time_ms == at
        later = tracer.events("later", "ns%orders")
        assert [(e.event, e.detail, e.time_ms) for e in later] == [("stored", "delayed until 99", delayed_at)]
        half = tracer.events("tx")
        assert [(e.topic, e.detail) for e in half] == [("ns%pay", "half message (transaction)")]
        assert tracer.events("tx", "ns%orders") == [] and tracer.events("unknown") == []
        tracer.flush()
        assert store.get_max_offset_in_queue("rmq_sys_TRACE_DATA", 0) == 1  # only the delivery
    finally:
        store.shutdown()


def test_redrive_log_persists_and_prunes(tmp_path: Path) -> None:
    path = tmp_path / "dlq" / "redriven.json"
    log = RedriveLog(path)
    log.add("%DLQ%g", [1, 2, 3], min_offset=0)
    log.add("%DLQ%g", [7], min_offset=2)  # 1 went with retention
    again = RedriveLog(path)
    assert [again.contains("%DLQ%g", o) for o in (1, 2, 3, 7, 8)] == [False, True, True, True, False]


def test_trace_records_read_back_in_both_encodings() -> None:
    """Records are written by orjson: the same JSON as ``json.dumps(separators=(",", ":"))`` for
    ASCII, UTF-8 instead of ``\\u`` escapes otherwise; records written before (json.dumps, escapes)
    are still read, and quotes, newlines and non-ASCII text come back as they went in."""
    store = _Store()
    tracer = MessageTracer(store)
    tracer.record("m1", "ns%t", "delivered", group="ns%g", attempt=2, client_id='c"1\n', detail="état ✓")
    tracer._pending = collections.deque((*e[:3], 7, *e[4:]) for e in tracer._pending)
    tracer.flush()
    event = ["m1", "ns%t", "delivered", 7, "ns%g", 2, 'c"1\n', "état ✓"]
    assert json.loads(store.records[0].body) == [event]
    assert store.records[0].body == json.dumps([event], separators=(",", ":"), ensure_ascii=False).encode()
    old = json.dumps([["m2", "ns%t", "acked", 9, "ns%g", 1, "c2", "déjà"]], separators=(",", ":"))
    assert "\\u" in old  # the earlier writer's escapes
    store.records.append(type(store.records[0])("rmq_sys_TRACE_DATA", 0, old.encode(), {"KEYS": "m2"}))
    assert tracer.events("m1", "ns%t") == [TraceEvent(*event)]
    assert tracer.events("m2", "ns%t") == [TraceEvent("m2", "ns%t", "acked", 9, "ns%g", 1, "c2", "déjà")]


def test_trace_text_orjson_refuses_is_written_escaped() -> None:
    """A lone surrogate (text that is not UTF-8) or an int past 64 bits fails orjson: the record is
    written by json.dumps instead, with escapes, and reads back; no event of the batch is lost."""
    store = _Store()
    tracer = MessageTracer(store)
    tracer.record("m1", "ns%t", "delivered", detail="half \ud800 pair")
    tracer.record("m2", "ns%t", "acked", attempt=1 << 70)
    tracer.flush()
    assert len(store.records) == 1 and b"\\ud800" in store.records[0].body
    assert [e.detail for e in tracer.events("m1", "ns%t")] == ["half \ud800 pair"]
    assert [e.attempt for e in tracer.events("m2", "ns%t")] == [1 << 70]


def test_a_large_flush_lets_the_loop_run_between_its_slices() -> None:
    """A flush holds the event loop while it encodes and stores: a large one is stored a record at a
    time, the loop running other work between them, and no event is lost."""
    ticks = 0
    puts: list[tuple[int, int]] = []  # (records, ticks when stored)

    class Store(_Store):
        async def put_messages_async(self, msgs: list[Any]) -> Any:
            puts.append((len(msgs), ticks))
            self.records += msgs
            return types.SimpleNamespace(ok=True)

    store = Store()

    async def run() -> None:
        nonlocal ticks
        tracer = MessageTracer(store)
        tracer.record_many([(f"m{i:04d}", 1) for i in range(1000)], "ns%t", "delivered", group="ns%g")

        async def other_work() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other_work())
        await asyncio.sleep(0)
        await tracer.flush_async()
        task.cancel()

    asyncio.run(run())
    assert [n for n, _ in puts] == [1, 1, 1, 1]  # 1,000 events: 4 records of at most 256
    assert all(later > earlier for (_, earlier), (_, later) in itertools.pairwise(puts))
    assert sum(len(entry["ids"]) for r in store.records for entry in json.loads(r.body)) == 1000


class _HaStore(_Store):
    """A store that may refuse writes: not writable (an HA replica), or a put that fails."""

    def __init__(self) -> None:
        super().__init__()
        self.writable = True
        self.refuse: Any = None  # a PutMessageStatus the next puts fail with
        self.puts = 0

    async def put_messages_async(self, msgs: list[Any]) -> Any:
        self.puts += 1
        if self.refuse is not None:
            return types.SimpleNamespace(ok=False, status=self.refuse)
        self.records += msgs
        return types.SimpleNamespace(ok=True)


def _dropped_total() -> float:
    """``mq_broker_trace_events_dropped_total`` as the node's metrics serve it."""
    return REGISTRY.get_sample_value("mq_broker_trace_events_dropped_total") or 0.0


def _stored_ids(store: _Store) -> list[str]:
    return [i for r in store.records for entry in json.loads(r.body) for i in entry["ids"]]


def test_a_replica_keeps_its_events_until_it_can_write_them(caplog: pytest.LogCaptureFixture) -> None:
    """A node that is an HA replica (its store not writable) serves reads but must not write its
    CommitLog: the events stay pending, said once, and are written when the node can write."""
    store = _HaStore()
    store.writable = False
    tracer = MessageTracer(store, max_pending=1000)

    async def run() -> None:
        await tracer.flush_async()  # nothing kept yet: nothing to say
        tracer.record_many([("m1", 1), ("m2", 1)], "ns%t", "delivered", group="ns%g")
        for _ in range(5):
            await tracer.flush_async()
        tracer.record_many([("m1", 1)], "ns%t", "acked", group="ns%g")
        await tracer.flush_async()
        assert store.puts == 0 and [e.message_id for e in tracer.pending_events()] == ["m1", "m2", "m1"]
        assert [e.event for e in tracer.events("m1", "ns%t")] == ["delivered", "acked"]  # still readable
        store.writable = True  # promoted
        await tracer.flush_async()

    with caplog.at_level("INFO", logger="dataplane.trace"):
        asyncio.run(run())
    assert [m for r in caplog.records if "not writable" in (m := r.getMessage())] == [
        "trace: the store is not writable (an HA replica); 2 events kept until it is"
    ]
    assert sum("writable again; writing 3 kept events" in r.getMessage() for r in caplog.records) == 1
    assert _stored_ids(store) == ["m1", "m2", "m1"] and not tracer.pending_events()
    assert tracer.dropped == 0
    # a replica that stops with events kept drops them (counted), writing nothing
    store.writable = False
    tracer.record_many([("m3", 1), ("m4", 1)], "ns%t", "delivered", group="ns%g")
    tracer.flush()
    assert tracer.dropped == 2 and len(store.records) == 1 and not tracer.pending_events()


def test_a_put_refused_by_a_demoted_store_puts_its_events_back_in_order() -> None:
    store = _HaStore()
    store.refuse = PutMessageStatus.SERVICE_NOT_AVAILABLE  # demoted between the check and the put
    tracer = MessageTracer(store, max_pending=600)

    async def run() -> None:
        tracer.record_many([(f"a{i:03d}", 1) for i in range(300)], "ns%t", "delivered")  # 2 records
        await tracer.flush_async()
        assert store.puts == 1  # the first record refused: the rest is not tried
        tracer.record_many([(f"b{i:03d}", 1) for i in range(400)], "ns%t", "delivered")
        # 700 pending past a bound of 600: the oldest 100 go, as for any overflow
        assert tracer.dropped == 100
        store.refuse = None
        await tracer.flush_async()

    asyncio.run(run())
    expected = [f"a{i:03d}" for i in range(100, 300)] + [f"b{i:03d}" for i in range(400)]
    assert _stored_ids(store) == expected and not tracer.pending_events()


def test_events_a_failing_store_refuses_are_dropped_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _HaStore()
    store.refuse = PutMessageStatus.DISK_FULL
    tracer = MessageTracer(store)
    before = _dropped_total()

    async def run() -> None:
        for n in range(3):
            tracer.record_many([(f"m{n}{i}", 1) for i in range(10)], "ns%t", "delivered")
            await tracer.flush_async()
        store.refuse = None
        tracer.record_many([("ok", 1)], "ns%t", "acked")
        await tracer.flush_async()

    with caplog.at_level("INFO", logger="dataplane.trace"):
        asyncio.run(run())
    assert tracer.dropped == 30 and _dropped_total() - before == 30
    assert _stored_ids(store) == ["ok"]
    messages = [r.getMessage() for r in caplog.records]
    assert sum("not stored (DISK_FULL)" in m for m in messages) == 1
    assert sum("stored again (30 dropped so far)" in m for m in messages) == 1
