"""TimerMessageStore over a real MessageStore: nothing early, recall, restart from the checkpoint."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataplane.store import MessageStore, MessageStoreConfig, MessageToStore
from dataplane.timer import (
    P_DELIVER_MS,
    TIMER_TOPIC,
    RecallHandle,
    RecallTooLate,
    TimerMessageStore,
    to_timer_message,
)
from dataplane.timer import service as timer_service
from tests.unit.timer.conftest import CheckpointRecordingStore

TOPIC = "ns%delayed"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = MessageStore(MessageStoreConfig(tmp_path / "store", mapped_file_size_commit_log=1 << 20))
    s.start()
    yield s
    s.shutdown()


def _timers(store: MessageStore, tmp_path: Path) -> TimerMessageStore:
    t = TimerMessageStore(store, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=200)
    t.start()
    return t


def _send(store: MessageStore, n: int, deliver_ms: int, qid: int = 0) -> list[int]:
    msgs = [
        to_timer_message(
            MessageToStore(TOPIC, qid, f"body-{i}".encode(), {"UNIQ_KEY": f"id-{i}"}), deliver_ms
        )
        for i in range(n)
    ]
    result = store.put_messages(msgs)
    assert result.ok
    return [e.physical_offset for e in result.entries]


def _delivered(store: MessageStore, qid: int = 0) -> list[object]:
    return list(store.get_messages(TOPIC, qid, 0, max_count=1000).messages)


def _wait_for(pred: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_delivered_at_its_time_never_early(store: MessageStore, tmp_path: Path) -> None:
    timers = _timers(store, tmp_path)
    try:
        deliver = int(time.time() * 1000) + 1500
        _send(store, 5, deliver, qid=1)
        time.sleep(1.0)
        assert _delivered(store, 1) == []
        _wait_for(lambda: len(_delivered(store, 1)) == 5)
        for msg in _delivered(store, 1):
            assert msg.store_timestamp >= deliver  # type: ignore[attr-defined]
            assert msg.store_timestamp - deliver < 1000  # type: ignore[attr-defined]
            assert msg.properties[P_DELIVER_MS] == str(deliver)  # type: ignore[attr-defined]
            assert "REAL_TOPIC" not in msg.properties  # type: ignore[attr-defined]
        assert sorted(m.body for m in _delivered(store, 1)) == [f"body-{i}".encode() for i in range(5)]  # type: ignore[attr-defined]
    finally:
        timers.shutdown()


def test_past_timestamp_is_delivered_at_once(store: MessageStore, tmp_path: Path) -> None:
    timers = _timers(store, tmp_path)
    try:
        _send(store, 2, int(time.time() * 1000) - 5000)
        _wait_for(lambda: len(_delivered(store)) == 2, timeout=3)
    finally:
        timers.shutdown()


def test_recall_prevents_delivery_and_late_recall_fails(store: MessageStore, tmp_path: Path) -> None:
    timers = _timers(store, tmp_path)
    try:
        deliver = int(time.time() * 1000) + 1500
        offsets = _send(store, 3, deliver)
        timers.recall(RecallHandle(TOPIC, "id-1", deliver, offsets[1]))
        _wait_for(lambda: len(_delivered(store)) == 2)
        time.sleep(0.3)
        assert sorted(m.body for m in _delivered(store)) == [b"body-0", b"body-2"]  # type: ignore[attr-defined]
        with pytest.raises(RecallTooLate):
            timers.recall(RecallHandle(TOPIC, "id-0", deliver, offsets[0]))
    finally:
        timers.shutdown()


def test_restart_after_crash_delivers_everything_none_early(store: MessageStore, tmp_path: Path) -> None:
    timers = _timers(store, tmp_path)
    deliver = int(time.time() * 1000) + 2000
    _send(store, 50, deliver)
    _wait_for(lambda: timers._queue_offset == 50)
    # a crash: the threads stop, no final checkpoint, files left as they are
    timers._running = False
    for thread in timers._threads:
        thread.join()
    assert timers.log is not None and timers.wheel is not None
    timers.log.close()
    timers.wheel._map.close()
    again = _timers(store, tmp_path)
    try:
        assert again._queue_offset == 50  # replayed from the timer log, not dispatched twice
        time.sleep(max(0.0, deliver / 1000 - time.time() - 0.3))
        assert _delivered(store) == []
        _wait_for(lambda: len(_delivered(store)) == 50)
        assert min(m.store_timestamp for m in _delivered(store)) >= deliver  # type: ignore[attr-defined]
    finally:
        again.shutdown()


def test_clean_restart_keeps_pending_timers(store: MessageStore, tmp_path: Path) -> None:
    timers = _timers(store, tmp_path)
    deliver = int(time.time() * 1000) + 1500
    _send(store, 10, deliver)
    _wait_for(lambda: timers._queue_offset == 10)
    timers.shutdown()
    again = _timers(store, tmp_path)
    try:
        _wait_for(lambda: len(_delivered(store)) == 10)
        assert threading.active_count() >= 1
    finally:
        again.shutdown()


def test_timer_log_segments_of_delivered_timers_are_deleted(store: MessageStore, tmp_path: Path) -> None:
    """The timer log follows the pending timers: segments holding only delivered ones go (after the
    checkpoint that covers them), one a pending timer needs stays, across a restart too."""

    def timers_with_small_segments() -> TimerMessageStore:
        t = TimerMessageStore(
            store, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=100, log_segment_records=8
        )
        t.trim_interval_s = 0.0
        t.start()
        return t

    timers = timers_with_small_segments()
    segments = tmp_path / "timer" / "timerlog"
    now = int(time.time() * 1000)
    _send(store, 40, now + 1000)  # positions 0..39: five full segments
    late = now + 3500
    _send(store, 1, late, qid=1)  # position 40: the sixth segment
    _wait_for(lambda: len(_delivered(store)) == 40)
    # the five segments of delivered timers are deleted; the pending timer's stays
    _wait_for(lambda: timers.log is not None and timers.log.start == 40 * 52)
    assert sorted(f.name for f in segments.iterdir()) == [f"{40 * 52:020d}"]
    assert _delivered(store, 1) == []
    timers.shutdown()
    again = timers_with_small_segments()
    try:
        assert again.log is not None and again.log.start == 40 * 52
        _wait_for(lambda: len(_delivered(store, 1)) == 1)
        assert _delivered(store, 1)[0].store_timestamp >= late  # type: ignore[attr-defined]
        assert len(_delivered(store)) == 40  # nothing delivered twice
        # more timers roll into new segments; once delivered, all but the one appended to go
        _send(store, 20, int(time.time() * 1000) + 500, qid=2)
        _wait_for(lambda: len(_delivered(store, 2)) == 20)
        _wait_for(lambda: again.log is not None and again.log.segment_count == 1)
        assert again.log.end == 61 * 52 and again.log.start == 56 * 52
    finally:
        again.shutdown()


class _CountingStore:
    """The store, minus dispatch wake-ups, counting timer messages read back by the dispatcher."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.timer_reads = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def add_dispatch_listener(self, listener: object) -> None:
        pass  # the dispatcher then polls (every 0.1 s), after accepted() has run

    def get_messages(self, topic: str, *args: object, **kwargs: object) -> object:
        result = self._store.get_messages(topic, *args, **kwargs)  # type: ignore[arg-type]
        if topic == TIMER_TOPIC:
            self.timer_reads += len(result.messages)
        return result


def _stored(
    store: MessageStore, n: int, deliver_ms: int, first: int = 0
) -> tuple[list[MessageToStore], list[object]]:
    msgs = [
        to_timer_message(MessageToStore(TOPIC, 0, f"body-{i}".encode(), {"UNIQ_KEY": f"id-{i}"}), deliver_ms)
        for i in range(first, first + n)
    ]
    result = store.put_messages(msgs)
    assert result.ok
    return msgs, list(result.entries)


@contextlib.contextmanager
def _dispatcher_paused(timers: TimerMessageStore) -> Iterator[None]:
    """The dispatcher thread reads nothing from the CommitLog meanwhile (it wakes every 0.1 s and
    may otherwise come between a send and its ``accepted``)."""
    timers._dispatch_pending = lambda: 0  # type: ignore[method-assign]
    try:
        yield
    finally:
        del timers._dispatch_pending


def test_accepted_links_sent_timers_without_reading_them_back(store: MessageStore, tmp_path: Path) -> None:
    counting = _CountingStore(store)
    timers = TimerMessageStore(counting, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=200)
    timers.start()
    try:
        _wait_for(lambda: timers._last_checkpoint > 0)  # the scanner's first checkpoint is done
        deliver = int(time.time() * 1000) + 1200
        with _dispatcher_paused(timers):  # it would read a batch stored and not yet accepted
            for batch in range(4):
                timers.accepted(*_stored(store, 25, deliver, first=batch * 25))
        assert timers._queue_offset == 100 and timers.accepted_direct == 100
        _wait_for(lambda: len(_delivered(store)) == 100)
        assert counting.timer_reads == 0
        assert min(m.store_timestamp for m in _delivered(store)) >= deliver  # type: ignore[attr-defined]
        assert sorted(m.body for m in _delivered(store)) == sorted(f"body-{i}".encode() for i in range(100))  # type: ignore[attr-defined]
    finally:
        timers.shutdown()


def test_accepted_after_a_gap_waits_for_the_dispatcher(store: MessageStore, tmp_path: Path) -> None:
    """A batch that is not next in the timer queue is kept as a hint: the dispatcher reads the gap
    from the CommitLog, then links the hinted batch without reading it; each timer delivered once."""
    counting = _CountingStore(store)
    timers = TimerMessageStore(counting, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=200)
    timers.start()
    try:
        deliver = int(time.time() * 1000) + 1200
        with _dispatcher_paused(timers):  # it would read the gap before the batch after it is accepted
            _stored(store, 10, deliver)  # never handed to accepted()
            timers.accepted(*_stored(store, 10, deliver, first=10))
            assert timers.accepted_direct == 0 and timers._queue_offset == 0
        _wait_for(lambda: len(_delivered(store)) == 20)
        time.sleep(0.3)
        assert counting.timer_reads == 10 and timers.accepted_direct == 10
        assert sorted(m.body for m in _delivered(store)) == sorted(f"body-{i}".encode() for i in range(20))  # type: ignore[attr-defined]
        assert min(m.store_timestamp for m in _delivered(store)) >= deliver  # type: ignore[attr-defined]
    finally:
        timers.shutdown()


class _SlowCheckpointStore(_CountingStore):
    def checkpoint(self) -> None:
        time.sleep(1.5)  # a CommitLog fsync after a burst of sends on a busy disk
        self._store.checkpoint()


def test_a_slow_checkpoint_does_not_delay_delivery(store: MessageStore, tmp_path: Path) -> None:
    slow = _SlowCheckpointStore(store)
    timers = TimerMessageStore(slow, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=200)
    timers.start()
    try:
        for k in range(3):  # due while a checkpoint is in its fsync, whenever it started
            deliver = int(time.time() * 1000) + 700
            _send(store, 5, deliver, qid=k)
            _wait_for(lambda k=k: len(_delivered(store, k)) == 5)  # type: ignore[misc]
            for msg in _delivered(store, k):
                assert 0 <= msg.store_timestamp - deliver < 500  # type: ignore[attr-defined]
    finally:
        timers.shutdown()


class _WakingCountingStore(_CountingStore):
    def add_dispatch_listener(self, listener: object) -> None:
        self._store.add_dispatch_listener(listener)  # type: ignore[arg-type]


def test_a_woken_dispatcher_lets_the_send_path_hand_over_first(
    store: MessageStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under SYNC_FLUSH the send path calls accepted() only after the group commit, while the store
    wakes the dispatcher at once: the dispatcher waits a moment so it need not read them back."""
    # a wait far longer than the test's own "group commit", so a loaded CI machine that stretches
    # the 5 ms sleep still hands over first; without the wait the dispatcher reads them back at once
    monkeypatch.setattr(timer_service, "_DISPATCH_DELAY_S", 0.5)
    # and no look of its own every 0.1 s, which may come between a send and its accepted()
    monkeypatch.setattr(timer_service, "_DISPATCH_POLL_S", 30.0)
    counting = _WakingCountingStore(store)
    timers = TimerMessageStore(counting, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=200)
    timers.start()
    try:
        _wait_for(lambda: timers._last_checkpoint > 0)
        deliver = int(time.time() * 1000) + 1000
        for batch in range(3):
            msgs, entries = _stored(store, 20, deliver, first=batch * 20)  # wakes the dispatcher
            time.sleep(0.005)  # the group commit
            timers.accepted(msgs, entries)
        _wait_for(lambda: len(_delivered(store)) == 60)
        assert counting.timer_reads == 0 and timers.accepted_direct == 60
    finally:
        timers.shutdown()


def _checkpoints(timers: TimerMessageStore, count: int) -> None:
    """Wait until ``count`` more timer checkpoints were written."""
    seen = [timers._last_checkpoint]

    def more() -> bool:
        if timers._last_checkpoint != seen[-1]:
            seen.append(timers._last_checkpoint)
        return len(seen) > count

    _wait_for(more)


def test_the_store_is_checkpointed_for_re_puts_only(store: MessageStore, tmp_path: Path) -> None:
    """The timers' checkpoint makes their re-puts durable before recording the seconds delivered;
    with none since the last one it leaves the store to its own checkpoints (it used to fsync the
    ConsumeQueues and the CommitLog again every interval while other topics were sent to)."""
    recording = CheckpointRecordingStore(store)
    timers = TimerMessageStore(recording, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=100)
    timers.start()
    try:
        for _ in range(4):  # sends to another topic, no timer due
            assert store.put_messages([MessageToStore("ns%plain", 0, b"x" * 100, {})]).ok
            _checkpoints(timers, 1)
        assert recording.flushed_at_checkpoints == []

        deliver = int(time.time() * 1000) + 300
        _send(store, 5, deliver)
        _wait_for(lambda: len(_delivered(store)) == 5)
        end = max(m.physical_offset + m.size for m in _delivered(store))  # type: ignore[attr-defined]
        # the wheel second they were re-put in (a message linked after its second was read goes
        # with the next one)
        second = max(m.store_timestamp for m in _delivered(store)) // 1000  # type: ignore[attr-defined]
        path = tmp_path / "timer" / "checkpoint"

        def recorded() -> bool:
            cp = timer_service.TimerCheckpoint.load(path)
            return cp is not None and cp.delivered_second > second

        _wait_for(recorded)
        # the checkpoint that recorded the second as delivered had the re-puts fsynced first
        assert recording.flushed_at_checkpoints and recording.flushed_at_checkpoints[-1] >= end
        asked = len(recording.flushed_at_checkpoints)
        _checkpoints(timers, 3)
        assert len(recording.flushed_at_checkpoints) == asked  # nothing re-put since
    finally:
        timers.shutdown()
