"""CommitLogDispatcher: builds ConsumeQueue and IndexFile entries from appended records.

The hot path (:meth:`dispatch_batch`) runs inside the put lock right after the CommitLog write, so a
message is readable by queue offset as soon as ``put_messages`` returns. Recovery and replication
feed :meth:`dispatch_requests` the validated records of a stretch of the log (RocketMQ's "reput").
"""

from __future__ import annotations

from collections.abc import Callable

from dataplane.store.commit_log import AppendBatch
from dataplane.store.consume_queue import CQ_ENTRY, ConsumeQueueTable
from dataplane.store.index_service import IndexService
from dataplane.store.record import DispatchRequest, compiled_write_queue_runs

__all__ = ("CommitLogDispatcher", "DispatchListener")

DispatchListener = Callable[[str, int, int], None]


class CommitLogDispatcher:
    """Writes ConsumeQueue entries and index keys; returns the queues whose max offset moved.

    Guarantees: entries of one queue are written in queue-offset order with no gaps; a record below
    ``index_skip_below`` is not indexed again (it already was before a crash).
    """

    def __init__(self, queues: ConsumeQueueTable, index: IndexService):
        self.queues = queues
        self.index = index
        self.dispatched_offset = 0
        self.index_skip_below = -1
        self.last_store_timestamp = 0

    def dispatch_batch(self, batch: AppendBatch) -> dict[tuple[str, int], int]:
        """ConsumeQueue + index for a batch just appended; returns {(topic, qid): new max offset}.

        The CommitLog encoder already packed each queue's entries, so this is one write per queue;
        the compiled ``write_queue_runs`` makes the usual ones (see ``_record_codec.c``).
        """
        if compiled_write_queue_runs is not None:
            moved = compiled_write_queue_runs(batch.queue_runs, self.queues.queues, self._put_run)
        else:
            moved = {}
            for key, (first, entries) in batch.queue_runs.items():
                moved[key] = self._put_run(key, first, entries)
        if batch.index_requests:
            self.index.put_batch(batch.index_requests, batch.store_timestamp)
        self.dispatched_offset = batch.end_offset
        self.last_store_timestamp = batch.store_timestamp
        return moved

    def _put_run(self, key: tuple[str, int], first: int, entries: bytes | bytearray) -> int:
        return self.queues.find_or_create(*key).put(first, entries)

    def dispatch_requests(self, requests: list[DispatchRequest]) -> dict[tuple[str, int], int]:
        """Many records in log order (recovery, replication): one ConsumeQueue write per run of
        consecutive offsets, and one index call per run of records stored at the same time (a
        master's batch shares its store timestamp)."""
        pending: dict[tuple[str, int], tuple[int, list[bytes]]] = {}
        moved: dict[tuple[str, int], int] = {}
        pack = CQ_ENTRY.pack
        skip = self.index_skip_below
        keyed: list[tuple[str, str | None, str | None, int]] = []
        keyed_at = 0
        for req in requests:
            key = (req.topic, req.queue_id)
            run = pending.get(key)
            if run is not None and run[0] + len(run[1]) != req.queue_offset:
                self.queues.find_or_create(*key).put(run[0], b"".join(run[1]))
                run = None
            if run is None:
                run = pending[key] = (req.queue_offset, [])
            run[1].append(pack(req.physical_offset, req.size, req.tag_hash))
            if (req.keys or req.uniq_key) and req.physical_offset > skip:
                if keyed and req.store_timestamp != keyed_at:
                    self.index.put_batch(keyed, keyed_at)
                    keyed = []
                keyed_at = req.store_timestamp
                keyed.append((req.topic, req.keys, req.uniq_key, req.physical_offset))
        if keyed:
            self.index.put_batch(keyed, keyed_at)
        for key, (first, entries) in pending.items():
            cq = self.queues.find_or_create(*key)
            cq.put(first, b"".join(entries))
            moved[key] = cq.max_offset
        if requests:
            last = requests[-1]
            self.dispatched_offset = last.physical_offset + last.size
            self.last_store_timestamp = last.store_timestamp
        return moved
