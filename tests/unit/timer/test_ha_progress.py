"""Timers under HA: a node that may not deliver follows the progress records in the CommitLog and,
once it may, delivers only what the previous master did not (docs/ha.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataplane.store import MessageStore, MessageStoreConfig, MessageToStore
from dataplane.timer import TimerMessageStore, to_timer_message
from dataplane.timer.checkpoint import TimerCheckpoint
from dataplane.timer.service import PROGRESS_TOPIC
from tests.unit.timer.conftest import CheckpointRecordingStore

TOPIC = "ns%delayed"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = MessageStore(MessageStoreConfig(tmp_path / "store", mapped_file_size_commit_log=1 << 20))
    s.start()
    yield s
    s.shutdown()


def _wait_for(pred: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _bodies(store: MessageStore) -> list[bytes]:
    return [m.body for m in store.get_messages(TOPIC, 0, 0, max_count=100).messages]


def _progress(store: MessageStore) -> list[dict[str, object]]:
    return [json.loads(m.body) for m in store.get_messages(PROGRESS_TOPIC, 0, 0, max_count=100).messages]


def test_follower_skips_what_the_master_delivered(store: MessageStore, tmp_path: Path) -> None:
    master = [False]
    timers = TimerMessageStore(store, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=200)
    timers.can_deliver = lambda: master[0]
    timers.publish_progress = True
    timers.start()
    try:
        # given three timers of one second (and one of the next), and a progress record saying the
        # previous master delivered the first of them before it died mid-second
        second = int(time.time()) + 2
        msgs = [
            to_timer_message(
                MessageToStore(TOPIC, 0, b"t%d" % i, {"UNIQ_KEY": f"id{i}"}), second * 1000 + 100
            )
            for i in range(3)
        ]
        msgs.append(to_timer_message(MessageToStore(TOPIC, 0, b"t3"), (second + 1) * 1000 + 100))
        offsets = [e.physical_offset for e in store.put_messages(msgs).entries]
        record = {"s": second, "d": False, "o": [offsets[0]]}
        assert store.put_messages([MessageToStore(PROGRESS_TOPIC, 0, json.dumps(record).encode())]).ok
        # when their time passes on a node that may not deliver: nothing is delivered
        time.sleep(max(0.0, second + 2.3 - time.time()))
        assert _bodies(store) == []
        # when it becomes the master: the rest of the half-delivered second and the next one
        master[0] = True
        _wait_for(lambda: len(_bodies(store)) == 3)
        time.sleep(0.5)
        assert sorted(_bodies(store)) == [b"t1", b"t2", b"t3"]
        # and its own deliveries are recorded: that second done, then the next
        progress = _progress(store)[1:]
        assert progress[0] == {"s": second, "d": True, "o": offsets[1:3]}
        assert progress[-1] == {"s": second + 1, "d": True, "o": [offsets[3]]}
    finally:
        timers.shutdown()


def test_losing_the_lease_stops_delivery(store: MessageStore, tmp_path: Path) -> None:
    master = [True]
    timers = TimerMessageStore(store, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=200)
    timers.can_deliver = lambda: master[0]
    timers.publish_progress = True
    timers.start()
    try:
        deliver_ms = int(time.time() * 1000) + 1200
        store.put_messages([to_timer_message(MessageToStore(TOPIC, 0, b"a"), deliver_ms)])
        _wait_for(lambda: _bodies(store) == [b"a"])
        master[0] = False
        store.put_messages([to_timer_message(MessageToStore(TOPIC, 0, b"b"), deliver_ms + 1000)])
        time.sleep(max(0.0, (deliver_ms + 1800) / 1000 - time.time()))
        assert _bodies(store) == [b"a"]
        master[0] = True
        _wait_for(lambda: _bodies(store) == [b"a", b"b"])
    finally:
        timers.shutdown()


def test_truncated_timer_queue_is_dispatched_again(store: MessageStore, tmp_path: Path) -> None:
    master = [False]
    timers = TimerMessageStore(store, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=200)
    timers.can_deliver = lambda: master[0]
    timers.start()
    try:
        # given a timer message the wheel took in, on a CommitLog tail that is then truncated (a
        # deposed master rejoining), and the new master's data written over the same offsets
        deliver_ms = int(time.time() * 1000) + 1500
        keep = store.put_messages([MessageToStore("ns%other", 0, b"kept")]).entries[0]
        store.put_messages([to_timer_message(MessageToStore(TOPIC, 0, b"divergent"), deliver_ms)])
        _wait_for(lambda: timers._queue_offset == 1)
        store.truncate_to(keep.physical_offset + keep.size)
        timers.on_truncated()
        store.put_messages([MessageToStore("ns%other", 0, b"x" * 40)])
        store.put_messages([to_timer_message(MessageToStore(TOPIC, 0, b"new"), deliver_ms)])
        # when this node delivers
        master[0] = True
        # then the new timer message (same timer queue offset as the divergent one) is delivered,
        # and the stale wheel entry, now pointing at another message, is not
        _wait_for(lambda: _bodies(store) == [b"new"])
        time.sleep(1.0)
        assert _bodies(store) == [b"new"]
    finally:
        timers.shutdown()


def test_an_idle_master_still_records_progress(store: MessageStore, tmp_path: Path) -> None:
    timers = TimerMessageStore(store, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=200)
    timers.publish_progress = True
    timers.progress_interval_s = 0.5
    timers.start()
    try:
        start = int(time.time())
        _wait_for(lambda: len(_progress(store)) >= 2, timeout=5)
        # then seconds without timers are recorded as done, so a follower keeps up
        records = _progress(store)
        assert all(r["o"] == [] and r["d"] is True for r in records)
        assert [r["s"] for r in records] == sorted(r["s"] for r in records)
        assert records[-1]["s"] >= start  # type: ignore[operator]
    finally:
        timers.shutdown()


def test_a_follower_checkpoints_the_store_before_recording_adopted_progress(
    store: MessageStore, tmp_path: Path
) -> None:
    """The master's re-puts reach a follower's CommitLog before its progress records: a follower
    records a second it adopted as delivered only after a store checkpoint made them durable."""
    recording = CheckpointRecordingStore(store)
    timers = TimerMessageStore(recording, tmp_path / "timer", max_delay_ms=60_000, checkpoint_interval_ms=100)
    timers.can_deliver = lambda: False
    timers.start()
    try:
        _wait_for(lambda: timers._last_checkpoint > 0)
        started = timers._last_checkpoint
        _wait_for(lambda: timers._last_checkpoint > started + 0.25)  # a few checkpoints, nothing adopted
        assert recording.flushed_at_checkpoints == []
        second = int(time.time()) + 30
        record = {"s": second, "d": True, "o": []}
        assert store.put_messages([MessageToStore(PROGRESS_TOPIC, 0, json.dumps(record).encode())]).ok
        path = tmp_path / "timer" / "checkpoint"

        def recorded() -> bool:
            cp = TimerCheckpoint.load(path)
            return cp is not None and cp.delivered_second == second + 1

        _wait_for(recorded)
        assert recording.flushed_at_checkpoints
    finally:
        timers.shutdown()
