"""TimerMessageStore: delay messages through the CommitLog, a timer log and a timer wheel.

Flow (RocketMQ's TimerMessageStore):

1. SendMessage stores a delay message under :data:`TIMER_TOPIC` queue 0 with its real topic and
   queue in ``REAL_TOPIC``/``REAL_QID`` and its delivery time in ``TIMER_OUT_MS``
   (:func:`to_timer_message`).
2. The dispatcher thread reads that ConsumeQueue, appends one record per message to the timer log
   and links it into the wheel slot of its delivery second.
3. The scanner thread walks the wheel second by second; when a second starts it follows the slot's
   list and re-puts each entry, no earlier than its ``TIMER_OUT_MS``, to the real topic and queue
   (same ``UNIQ_KEY``; the delivery time kept in ``__STARTDELIVERTIME``).
4. A recall stores a delete message (``TIMER_DEL_OFFSET``) in the same topic; the dispatcher turns
   it into a delete marker in the same slot, and the scanner skips the entry it names.

Under HA (docs/ha.md) only a writable master delivers. Its re-put batches end with a progress
record in :data:`PROGRESS_TOPIC` (``{"s": second, "d": second done, "o": [timer cl offsets]}``),
written in the same ``put_messages`` call, so the CommitLog says how far delivery went. A replica's
scanner does not deliver: it follows those records (:meth:`TimerMessageStore._follow`), and on
promotion resumes after the last delivered second, skipping the entries of a half-delivered one.

The checkpoint (every ``checkpoint_interval_ms``, in a thread of its own so its fsyncs never delay a
delivery) records the delivered second, the timer log end and the next ConsumeQueue offset, after
fsyncing the timer log, the wheel and (when something was re-put since the last one) the CommitLog.
After a crash the timer log is replayed from the checkpointed end (records carry their queue offset), so
nothing is lost and nothing is delivered early; a second that was being delivered is delivered
again (at least once).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from dataplane.store.message import PROPERTY_UNIQ_KEY, MessageToStore
from dataplane.store.status import GetMessageStatus, PutMessageStatus
from dataplane.timer.checkpoint import TimerCheckpoint
from dataplane.timer.recall import RecallHandle
from dataplane.timer.scanner import SlotEntries, read_slot
from dataplane.timer.timer_log import (
    _CRC,
    MAGIC_DELETE,
    MAGIC_ENTRY,
    RECORD,
    RECORD_SIZE,
    SEGMENT_RECORDS,
    TimerLog,
)
from dataplane.timer.wheel import Slot, TimerWheel

__all__ = (
    "PROGRESS_TOPIC",
    "P_DELIVER_MS",
    "P_REAL_QID",
    "P_REAL_TOPIC",
    "P_TIMER_DEL_OFFSET",
    "P_TIMER_OUT_MS",
    "TIMER_TOPIC",
    "RecallTooLate",
    "TimerMessageStore",
    "to_timer_message",
)

logger = logging.getLogger(__name__)

TIMER_TOPIC = "rmq_sys_wheel_timer"
PROGRESS_TOPIC = "rmq_sys_timer_progress"
P_REAL_TOPIC = "REAL_TOPIC"
P_REAL_QID = "REAL_QID"
P_TIMER_OUT_MS = "TIMER_OUT_MS"
P_TIMER_DEL_OFFSET = "TIMER_DEL_OFFSET"
P_DELIVER_MS = "__STARTDELIVERTIME"
_DISPATCH_BATCH = 1024
_DISPATCH_DELAY_S = 0.05
_DISPATCH_POLL_S = 0.1  # how often the dispatcher looks for what no wake announced
_MAX_HINT_BATCHES = 4096  # send batches waiting for the dispatcher (at most ~1M records)
_PUT_BATCH = 512
_PROGRESS_TAIL = 64  # progress records read back to find the last second and its delivered entries


def _always() -> bool:
    return True


class _Deposed(Exception):
    """This node stopped being a writable master in the middle of a second's delivery."""


class RecallTooLate(Exception):
    """The message was delivered already (or is being delivered this second), or never existed."""


def to_timer_message(msg: MessageToStore, deliver_ms: int) -> MessageToStore:
    """``msg`` re-addressed to the timer topic, its real topic/queue and time in properties."""
    props = dict(msg.properties)
    props[P_REAL_TOPIC] = msg.topic
    props[P_REAL_QID] = str(msg.queue_id)
    props[P_TIMER_OUT_MS] = str(deliver_ms)
    return MessageToStore(
        TIMER_TOPIC,
        0,
        msg.body,
        props,
        msg.flag,
        msg.sys_flag,
        msg.born_timestamp,
        msg.born_host,
        msg.reconsume_times,
        msg.prepared_transaction_offset,
    )


def _real_message(stored: Any) -> MessageToStore:
    props = dict(stored.properties)
    topic = props.pop(P_REAL_TOPIC)
    queue_id = int(props.pop(P_REAL_QID, "0"))
    props[P_DELIVER_MS] = props.pop(P_TIMER_OUT_MS, "0")
    return MessageToStore(
        topic,
        queue_id,
        stored.body,
        props,
        stored.flag,
        stored.sys_flag,
        stored.born_timestamp,
        stored.born_host,
        stored.reconsume_times,
    )


class TimerMessageStore:
    """Timers over one :class:`~dataplane.store.MessageStore` (started before, shut down after).

    ``store`` needs ``put_messages``, ``put_messages_async``, ``get_messages``,
    ``look_message_by_offset``, ``get_min_offset_in_queue`` and ``add_dispatch_listener``.
    """

    def __init__(
        self,
        store: Any,
        timer_dir: Path,
        max_delay_ms: int = 3 * 86_400_000,
        slot_count: int | None = None,
        checkpoint_interval_ms: int = 1000,
        clock: Callable[[], float] = time.time,
        log_segment_records: int = SEGMENT_RECORDS,
    ) -> None:
        self.store = store
        self.log_segment_records = log_segment_records
        self.dir = timer_dir
        self.max_delay_ms = max_delay_ms
        self.slot_count = slot_count or 2 * (max_delay_ms // 1000 + 1) + 60
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._dispatch_wake = threading.Event()
        self._scan_wake = threading.Event()
        self._checkpoint_wake = threading.Event()  # set only to stop
        self._running = False
        self._threads: list[threading.Thread] = []
        self.log: TimerLog | None = None
        self.wheel: TimerWheel | None = None
        self._queue_offset = 0
        self._next_second = 0  # the scanner reads this second next
        self._delivered_second = 0  # every second below it is re-put
        self._last_checkpoint = 0.0
        self.trim_interval_s = 60.0  # how often checkpoint() looks for timer-log segments to delete
        self._last_trim = 0.0
        self.delivered = 0  # counters (tests, metrics)
        # store appends of the scanner (re-puts, progress records; on a replica, progress adopted),
        # and how many the last checkpoint's store checkpoint covered: without new ones it is not
        # asked for again
        self._puts = 0
        self._puts_checkpointed = 0
        self.recalled = 0
        self.accepted_direct = 0  # linked from accepted() hints, not read back from the CommitLog
        # first queue offset -> records (magic, cl offset, deliver ms, queue offset) from the send path
        self._hints: dict[int, list[tuple[int, int, int, int]]] = {}
        # HA: deliver only while this returns True (a writable master); record progress in the log
        self.can_deliver: Callable[[], bool] = _always
        self.publish_progress = False
        self._following = False
        self._progress_seen = 0  # progress-topic queue offset read up to
        self._skip: set[int] = set()  # timer cl offsets the previous master delivered already
        self._skip_second = -1
        # an idle master still records its progress this often, so replicas do not fall far behind
        self.progress_interval_s = 60.0
        self._last_progress = 0.0

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    #
    # Lifecycle and recovery
    #

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = TimerLog(self.dir / "timerlog", self.log_segment_records)
        self.wheel = TimerWheel(self.dir / "timerwheel", self.slot_count)
        self._recover()
        self._running = True
        self.store.add_dispatch_listener(self._on_dispatch)
        for name, target in (
            ("TimerDispatcher", self._dispatch_loop),
            ("TimerScanner", self._scan_loop),
            ("TimerCheckpoint", self._checkpoint_loop),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _recover(self) -> None:
        log, wheel = self.log, self.wheel
        assert log is not None and wheel is not None
        cp = TimerCheckpoint.load(self.dir / "checkpoint")
        now_s = self._now_ms() // 1000
        if cp is None:
            delivered, start = now_s, 0
            queue_offset = int(self.store.get_min_offset_in_queue(TIMER_TOPIC, 0))
        else:
            delivered, start, queue_offset = cp.delivered_second, cp.timer_log_end, cp.queue_offset
        if cp is None or not wheel.loaded:
            wheel.reset()
            start = 0
        self._delivered_second = self._next_second = delivered
        end, queue_offset = self._replay(start, queue_offset)
        if any(s.last_pos >= end or s.first_pos >= end for s in wheel.slots()):
            # the wheel reached disk ahead of the timer log (power loss): rebuild it from the log
            logger.warning("timer wheel points past the timer log end %d; rebuilding it", end)
            wheel.reset()
            end, queue_offset = self._replay(0, queue_offset)
        if end < log.end:
            logger.warning("timer log: truncating a torn tail at %d (was %d)", end, log.end)
        log.truncate(end)
        self._queue_offset = queue_offset
        logger.info(
            "timers recovered: delivered up to %d, timer log %d bytes, timer queue offset %d",
            delivered,
            end,
            queue_offset,
        )

    def _replay(self, start: int, queue_offset: int) -> tuple[int, int]:
        """Link every valid record from ``start`` that the wheel lacks; returns (end, queue offset)."""
        log, wheel = self.log, self.wheel
        assert log is not None and wheel is not None
        end = start
        for pos, rec in log.scan(start):
            if rec is None:
                break
            end = pos + RECORD_SIZE
            if rec.queue_offset >= 0:
                queue_offset = max(queue_offset, rec.queue_offset + 1)
            if rec.slot_second < self._delivered_second:
                continue
            slot = wheel.get(rec.slot_second)
            if slot.last_pos < pos:
                first = slot.first_pos if slot.first_pos >= 0 else pos
                wheel.put(Slot(rec.slot_second, first, pos, slot.linked + 1))
        return end, queue_offset

    def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        self._dispatch_wake.set()
        self._scan_wake.set()
        self._checkpoint_wake.set()
        deadline = time.monotonic() + 15  # one bound for all: a stop must end (server.py)
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                logger.error("timers: thread %s did not stop; going on without it", thread.name)
        self._threads = []
        self.checkpoint()
        assert self.log is not None and self.wheel is not None
        self.log.close()
        self.wheel.close()

    def _checkpoint_loop(self) -> None:
        """Checkpoint every interval in a thread of its own: the fsyncs (the CommitLog's can take
        seconds after a burst of sends) never hold up the scanner's deliveries."""
        interval = self.checkpoint_interval_ms / 1000
        while self._running:
            self._checkpoint_wake.wait(max(0.0, self._last_checkpoint + interval - time.monotonic()))
            if not self._running:
                return
            try:
                self.checkpoint()
            except Exception:
                logger.exception("timer checkpoint failed")
                time.sleep(0.5)

    def checkpoint(self) -> None:
        """fsync the timer log, the wheel and the CommitLog, then record how far they go."""
        log, wheel = self.log, self.wheel
        if log is None or wheel is None:
            return
        with self._lock:
            cp = TimerCheckpoint(self._delivered_second, log.end, self._queue_offset)
        # Every re-put of a second below cp's was counted before the second was marked delivered.
        puts = self._puts
        # the fsyncs outside the lock: they cover at least what ``cp`` names, and the send path
        # (accepted) never finds the lock taken for them. A wheel that reaches disk ahead of the log
        # is rebuilt by recovery (the kernel may write its pages back at any time anyway).
        log.flush()
        wheel.flush()
        store_checkpoint = getattr(self.store, "checkpoint", None)
        if store_checkpoint is not None and puts != self._puts_checkpointed:
            # the re-put messages of the delivered seconds are durable. Only when there are new
            # ones: the store checkpoints itself as well, and under sends with no timers due this
            # call fsynced every ConsumeQueue and the CommitLog a second time each second.
            store_checkpoint()
        self._puts_checkpointed = puts
        cp.save(self.dir / "checkpoint")
        self._last_checkpoint = time.monotonic()
        if self._last_checkpoint - self._last_trim >= self.trim_interval_s:
            self._last_trim = self._last_checkpoint
            self._trim(cp)

    def _trim(self, cp: TimerCheckpoint) -> None:
        """Delete the timer-log segments no pending timer needs. Bounded by what ``cp`` (now on disk)
        says: records of seconds it counts as delivered and below its log end are never read again,
        not even by recovery after a crash."""
        log, wheel = self.log, self.wheel
        assert log is not None and wheel is not None
        before = cp.timer_log_end
        oldest = wheel.oldest_pos(cp.delivered_second)  # a slot linked meanwhile lies past cp's end
        if oldest >= 0:
            before = min(before, oldest)
        with self._lock:  # the send path appends (and may open a segment) under this lock
            freed = log.trim(before)
        if freed:
            logger.info("timer log: %d bytes of delivered timers deleted (starts at %d)", freed, log.start)

    #
    # Dispatch: timer-topic ConsumeQueue -> timer log + wheel
    #

    def _on_dispatch(self, topic: str, queue_id: int, new_max_offset: int) -> None:
        if topic == TIMER_TOPIC:
            self._dispatch_wake.set()

    def _dispatch_loop(self) -> None:
        while self._running:
            if self._dispatch_wake.wait(_DISPATCH_POLL_S):
                # let the send path hand over what it has just stored (accepted) first: under
                # SYNC_FLUSH it does so only after the group commit. Nothing waits for this thread:
                # the scanner and recalls dispatch what is pending themselves before reading.
                time.sleep(_DISPATCH_DELAY_S)
            self._dispatch_wake.clear()
            try:
                with self._lock:
                    while self._dispatch_pending() == _DISPATCH_BATCH:
                        pass
            except Exception:
                logger.exception("timer dispatch failed")
                time.sleep(0.5)

    def accepted(self, msgs: Sequence[MessageToStore], entries: Sequence[Any]) -> None:
        """Take the timer messages the send path has just stored (``entries``: their put results),
        so the dispatcher need not read them back from the CommitLog (a full decode per message).

        They are linked at once when they are next in the timer queue and the lock is free (the event
        loop never waits for the scanner); otherwise they wait, as compact records, for the dispatcher
        to reach their queue offset. The CommitLog stays the truth: what no hint covers (recalls, a
        send after a restart, a replica) the dispatcher reads as before."""
        if not self._running:
            return
        records = []
        for msg, entry in zip(msgs, entries, strict=True):
            if msg.topic == TIMER_TOPIC and msg.queue_id == 0:
                deliver_ms = int(msg.properties[P_TIMER_OUT_MS])
                records.append((MAGIC_ENTRY, entry.physical_offset, deliver_ms, entry.queue_offset))
        if not records:
            return
        first = records[0][3]
        if records[-1][3] - first != len(records) - 1 or first < self._queue_offset:
            return  # not one run of the queue, or dispatched already
        if len(self._hints) < _MAX_HINT_BATCHES:
            self._hints[first] = records
        if self._lock.acquire(blocking=False):
            try:
                self._link_hinted()
            finally:
                self._lock.release()

    def _link_hinted(self) -> int:
        """Link the hinted batches that are next in the timer queue (caller holds the lock)."""
        linked = 0
        while self._hints:
            records = self._hints.pop(self._queue_offset, None)
            if records is None:
                break
            self._append(records)
            self._queue_offset = records[-1][3] + 1
            linked += len(records)
        self.accepted_direct += linked
        return linked

    def _slot_second(self, deliver_ms: int) -> int:
        # never a second the scanner has read; never beyond the wheel's span
        second = max(deliver_ms // 1000, self._next_second)
        return min(second, self._delivered_second + self.slot_count - 1)

    def _dispatch_pending(self) -> int:
        """One batch into the timer log (caller holds the lock): hinted batches (:meth:`accepted`),
        then up to :data:`_DISPATCH_BATCH` read from the ConsumeQueue, stopping at the next hint.
        Returns :data:`_DISPATCH_BATCH` when more may be pending."""
        self._link_hinted()
        limit = _DISPATCH_BATCH
        if self._hints:
            queue_offset = self._queue_offset
            keys = list(self._hints)  # one C call: the send path may add hints meanwhile
            for key in keys:
                if key < queue_offset:
                    self._hints.pop(key, None)  # dispatched from the ConsumeQueue already
            later = [k for k in keys if k > queue_offset]
            if later:
                limit = min(limit, min(later) - queue_offset)
        result = self.store.get_messages(TIMER_TOPIC, 0, self._queue_offset, max_count=limit)
        if result.status is GetMessageStatus.OFFSET_TOO_SMALL:
            logger.warning(
                "timer queue: offset %d gone, moving to %d", self._queue_offset, result.next_begin_offset
            )
            self._queue_offset = result.next_begin_offset
            return 0
        if not result.messages:
            if result.next_begin_offset > self._queue_offset:
                self._queue_offset = result.next_begin_offset
            return 0
        records = []
        for msg in result.messages:
            props = msg.properties
            try:
                deliver_ms = int(props[P_TIMER_OUT_MS])
                target = props.get(P_TIMER_DEL_OFFSET)
                if target is None:
                    records.append((MAGIC_ENTRY, msg.physical_offset, deliver_ms, msg.queue_offset))
                else:
                    records.append((MAGIC_DELETE, int(target), deliver_ms, msg.queue_offset))
            except (KeyError, ValueError):
                logger.warning("timer queue offset %d: no valid timer property; skipped", msg.queue_offset)
        self._append(records)
        self._queue_offset = result.next_begin_offset
        more = len(result.messages) >= limit or self._queue_offset in self._hints
        return _DISPATCH_BATCH if more else len(result.messages)

    def _append(self, records: list[tuple[int, int, int, int]]) -> None:
        """Write records (magic, cl offset, deliver ms, queue offset), then link them into the wheel.

        One write for the batch and one wheel update per second it touches (not per record)."""
        log, wheel = self.log, self.wheel
        assert log is not None and wheel is not None
        touched: dict[int, list[int]] = {}  # second -> [first pos, last pos, linked]
        chunks = []
        pos = log.end
        pack, crc32, size = RECORD.pack, zlib.crc32, RECORD_SIZE
        floor = self._next_second
        ceiling = self._delivered_second + self.slot_count - 1
        for magic, cl_offset, deliver_ms, queue_offset in records:
            # never a second the scanner has read; never beyond the wheel's span
            second = min(max(deliver_ms // 1000, floor), ceiling)
            slot = touched.get(second)
            if slot is None:
                old = wheel.get(second)
                prev = old.last_pos
                touched[second] = [old.first_pos if old.first_pos >= 0 else pos, pos, old.linked + 1]
            else:
                prev = slot[1]
                slot[1] = pos
                slot[2] += 1
            head = pack(size, magic, prev, cl_offset, deliver_ms, second, queue_offset)
            chunks.append(head)
            chunks.append(_CRC.pack(crc32(head)))
            pos += size
        if not chunks:
            return
        log.append(b"".join(chunks))  # the log first: the wheel never points past it
        for second, (first, last, linked) in touched.items():
            wheel.put(Slot(second, first, last, linked))

    #
    # Scan: wheel second -> re-put to the real topic
    #

    def _scan_loop(self) -> None:
        while self._running:
            try:
                if not self.can_deliver():
                    self._following = True
                    self._follow()
                    self._scan_wake.wait(0.1)
                    self._scan_wake.clear()
                    continue
                if self._following:  # just promoted: first what the previous master recorded
                    self._following = False
                    self._follow()
                second = self._next_second
                wait_ms = second * 1000 - self._now_ms()  # absolute: no drift from the work done
                if wait_ms > 0:
                    self._scan_wake.wait(min(wait_ms, 1000) / 1000)
                    self._scan_wake.clear()
                    continue
                with self._lock:
                    while self._dispatch_pending() == _DISPATCH_BATCH:
                        pass
                    assert self.log is not None and self.wheel is not None
                    entries = read_slot(self.log, self.wheel, second)
                    self._next_second = second + 1
                self._deliver(second, entries)
                self._delivered_second = second + 1
                if (
                    self.publish_progress
                    and not entries.cl_offsets
                    and time.monotonic() - self._last_progress >= self.progress_interval_s
                ):
                    self._put([], second, True)
            except _Deposed:
                # the rest of the second is delivered by whoever is master next (this node again:
                # after the progress records of what it delivered, see _follow)
                logger.warning("timer delivery of second %d stopped: no longer a writable master", second)
                with self._lock:
                    self._next_second = min(self._next_second, second)
            except Exception:
                logger.exception("timer scan failed")
                time.sleep(0.5)

    def _deliver(self, second: int, entries: SlotEntries) -> None:
        cls, delivers = entries
        slot_end_ms = (second + 1) * 1000
        keep: Iterable[int] | None = None  # indexes to deliver (None: all)
        if delivers and max(delivers) >= slot_end_ms:
            # linked early because the wheel span was shorter than the delay: roll on
            later = [i for i, ms in enumerate(delivers) if ms >= slot_end_ms]
            with self._lock:
                self._append([(MAGIC_ENTRY, cls[i], delivers[i], -1) for i in later])
            keep = [i for i, ms in enumerate(delivers) if ms < slot_end_ms]
        if self._skip:
            skip = self._skip
            keep = [i for i in (keep if keep is not None else range(len(cls))) if cls[i] not in skip]
            if second > self._skip_second:
                self._skip = set()
        if keep is not None:
            cls = array("q", (cls[i] for i in keep))
            delivers = array("q", (delivers[i] for i in keep))
        if any(delivers[i] > delivers[i + 1] for i in range(len(delivers) - 1)):
            order = sorted(range(len(delivers)), key=delivers.__getitem__)
            cls = array("q", (cls[i] for i in order))
            delivers = array("q", (delivers[i] for i in order))
        n = len(cls)
        i = 0
        while i < n and self._running:
            wait_ms = delivers[i] - self._now_ms()
            if wait_ms > 0:
                time.sleep(wait_ms / 1000)
                continue
            # everything due by now, up to a batch: one store append (one lock, one dispatch)
            j = bisect_right(delivers, self._now_ms(), i, min(n, i + _PUT_BATCH))
            self._put(cls[i:j].tolist(), second, j == n)
            i = j
        if i < n:
            raise RuntimeError("timer scanner stopped mid-second")  # shutdown: the second stays undelivered

    def _put(self, offsets: list[int], second: int = -1, last: bool = True) -> None:
        msgs = []
        for offset in offsets:
            try:
                stored = self.store.look_message_by_offset(offset)
            except Exception:
                logger.exception("timer entry at commitlog offset %d is unreadable; dropped", offset)
                continue
            if stored.topic != TIMER_TOPIC or P_TIMER_DEL_OFFSET in stored.properties:
                # a timer-log record left from a CommitLog tail that was truncated (HA rejoin)
                logger.warning("timer entry at commitlog offset %d is not a timer message; dropped", offset)
                continue
            msgs.append(_real_message(stored))
        delivered = len(msgs)
        if self.publish_progress and (msgs or last):
            progress = {"s": second, "d": last, "o": offsets}
            msgs.append(
                MessageToStore(PROGRESS_TOPIC, 0, json.dumps(progress, separators=(",", ":")).encode())
            )
        while msgs and self._running:
            if not self.can_deliver():
                raise _Deposed
            result = self.store.put_messages(msgs)
            if result.status in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
                self._puts += 1
                self.delivered += delivered
                if self.publish_progress:
                    self._last_progress = time.monotonic()
                return
            logger.warning("timer re-put refused (%s); retrying", result.status)
            time.sleep(0.1)

    #
    # HA: follow the master's delivery progress (the progress topic), recover from truncation
    #

    def _follow(self) -> None:
        """Adopt the delivery progress recorded in the CommitLog (scanner thread)."""
        end = int(self.store.get_max_offset_in_queue(PROGRESS_TOPIC, 0))
        if end <= self._progress_seen:
            return
        start = max(int(self.store.get_min_offset_in_queue(PROGRESS_TOPIC, 0)), end - _PROGRESS_TAIL)
        result = self.store.get_messages(PROGRESS_TOPIC, 0, start, max_count=end - start)
        records = []
        for msg in result.messages:
            try:
                value = json.loads(msg.body)
                records.append((int(value["s"]), bool(value["d"]), [int(o) for o in value["o"]]))
            except (ValueError, KeyError, TypeError):
                logger.warning("timer progress record %d is unreadable; skipped", msg.queue_offset)
        self._progress_seen = end
        if not records:
            return
        second = max(r[0] for r in records)
        same = [r for r in records if r[0] == second]
        done = any(r[1] for r in same)
        # what the master re-put is in this store's CommitLog up to those records: the next
        # checkpoint makes it durable before it records the adopted second (as for our own re-puts)
        self._puts += 1
        with self._lock:
            delivered = second + 1 if done else second
            self._next_second = max(self._next_second, delivered)
            self._delivered_second = max(self._delivered_second, delivered)
            self._skip = set() if done else {o for r in same for o in r[2]}
            self._skip_second = second

    def on_truncated(self) -> None:
        """The CommitLog was truncated (HA rejoin): read the timer queue again from where it now ends,
        and take the delivery progress from what remains."""
        with self._lock:
            end = int(self.store.get_max_offset_in_queue(TIMER_TOPIC, 0))
            if self._queue_offset > end:
                logger.warning("timer queue truncated: dispatching again from offset %d", end)
                self._queue_offset = end
            self._progress_seen = 0
            self._skip = set()
            self._hints.clear()

    #
    # Recall
    #

    def _check_recallable(self, handle: RecallHandle) -> None:
        if handle.deliver_ms // 1000 < self._next_second:
            raise RecallTooLate(f"message {handle.message_id} was already delivered")

    def _delete_message(self, handle: RecallHandle) -> MessageToStore:
        props = {
            P_TIMER_OUT_MS: str(handle.deliver_ms),
            P_TIMER_DEL_OFFSET: str(handle.cl_offset),
            P_REAL_TOPIC: handle.topic,
            PROPERTY_UNIQ_KEY: handle.message_id,
        }
        return MessageToStore(TIMER_TOPIC, 0, b"recall", props)

    def _finish_recall(self, handle: RecallHandle) -> None:
        with self._lock:
            while self._dispatch_pending() == _DISPATCH_BATCH:
                pass
            self._check_recallable(handle)
        self.recalled += 1

    def recall(self, handle: RecallHandle) -> None:
        """Cancel a pending timer; RecallTooLate when its second was already read by the scanner."""
        self._check_recallable(handle)
        result = self.store.put_messages([self._delete_message(handle)])
        if result.status is not PutMessageStatus.PUT_OK:
            raise RuntimeError(f"store refused the recall: {result.status}")
        self._finish_recall(handle)

    async def recall_async(self, handle: RecallHandle) -> None:
        self._check_recallable(handle)
        result = await self.store.put_messages_async([self._delete_message(handle)])
        if result.status is not PutMessageStatus.PUT_OK:
            raise RuntimeError(f"store refused the recall: {result.status}")
        self._finish_recall(handle)
