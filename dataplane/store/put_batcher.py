"""AsyncPutBatcher: SYNC_FLUSH puts of one event loop appended together, acknowledged after fsync.

Under SYNC_FLUSH every ``put_messages_async`` caller waits for an fsync anyway, so the callers that
arrive in one loop iteration are appended as one batch (one encode, one write, one ConsumeQueue write
per queue, one group-commit request) and each gets its own slice of the result once the fsync covers
the batch. In pure Python the fixed cost of an append call (locks, syscalls, result objects) is
several times the cost of encoding one small message, so this is what lets 64 concurrent writers
approach one fsync per group instead of one append call per writer.

A batch is appended early, before the iteration ends, once it holds ``eager_bytes`` of bodies: its
fsync then runs (in the flush thread, the GIL released) while the loop encodes the rest of the
iteration's callers, instead of the disk waiting for the whole iteration and the loop for the disk
(docs/benchmarks.md, "Group commit: eager appends").
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence

from dataplane.store.flush import GroupCommitService
from dataplane.store.message import AppendEntry, MessageToStore, PutResult
from dataplane.store.status import PutMessageStatus

__all__ = ("AsyncPutBatcher",)

_Caller = tuple[Sequence[MessageToStore], "asyncio.Future[PutResult]"]
_Ack = tuple["asyncio.Future[PutResult]", list[AppendEntry]]
AppendFn = Callable[[Sequence[MessageToStore]], tuple[PutResult, int]]


def _acknowledge(acks: list[_Ack], durable: asyncio.Future[bool]) -> None:
    """Give every caller its entries: PUT_OK once durable, FLUSH_DISK_TIMEOUT otherwise."""
    ok = not durable.cancelled() and durable.result()
    status = PutMessageStatus.PUT_OK if ok else PutMessageStatus.FLUSH_DISK_TIMEOUT
    new = tuple.__new__  # PutResult(...) goes through a Python-level __new__: 3x slower
    for future, entries in acks:
        if not future.done():
            future.set_result(new(PutResult, (status, entries)))


class AsyncPutBatcher:
    """Appends the SYNC_FLUSH puts queued on a loop in one call, at the loop's next iteration.

    Guarantees: a caller's messages are appended contiguously and in order, callers in the order
    they called; a caller cancelled before the append has nothing appended; a result is PUT_OK only
    once the group commit's flushed offset covers the whole batch. A batch refused as
    MESSAGE_ILLEGAL is retried caller by caller, so one bad message fails only its own caller.
    """

    def __init__(
        self, append: AppendFn, flush: GroupCommitService, timeout_s: float, eager_bytes: int = 32 << 10
    ):
        self._append = append
        self._flush = flush
        self._timeout_s = timeout_s
        self._eager_bytes = eager_bytes
        self._pending: dict[asyncio.AbstractEventLoop, list[_Caller]] = {}
        self._pending_bytes: dict[asyncio.AbstractEventLoop, int] = {}

    def enqueue(self, msgs: Sequence[MessageToStore]) -> asyncio.Future[PutResult]:
        """Queue ``msgs`` for the running loop's next batch; the future gets the caller's result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutResult] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = []
            self._pending_bytes[loop] = 0
            loop.call_soon(self._drain, loop)
        pending.append((msgs, future))
        # one message per call is the common case: no generator for it
        size = self._pending_bytes[loop] + (
            len(msgs[0].body) if len(msgs) == 1 else sum(len(m.body) for m in msgs)
        )
        self._pending_bytes[loop] = size
        if size >= self._eager_bytes:
            self._drain(loop)  # the call_soon above then finds this batch gone (or the next one)
        return future

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        self._pending_bytes.pop(loop, None)
        callers = [c for c in self._pending.pop(loop, ()) if not c[1].done()]
        if not callers:
            return
        if len(callers) == 1:
            self._append_callers(callers, callers[0][0], loop)
            return
        msgs = [m for caller_msgs, _ in callers for m in caller_msgs]
        if not self._append_callers(callers, msgs, loop):
            for caller in callers:
                self._append_callers([caller], caller[0], loop)

    def _append_callers(
        self, callers: list[_Caller], msgs: Sequence[MessageToStore], loop: asyncio.AbstractEventLoop
    ) -> bool:
        """Append ``msgs`` (the callers' messages, in order); False if a retry one by one is needed."""
        result, end = self._append(msgs)
        if result.status is not PutMessageStatus.PUT_OK:
            if result.status is PutMessageStatus.MESSAGE_ILLEGAL and len(callers) > 1:
                return False
            for _, future in callers:
                if not future.done():
                    future.set_result(PutResult(result.status, []))
            return True
        entries = result.entries
        acks: list[_Ack] = []
        at = 0
        for caller_msgs, future in callers:
            count = len(caller_msgs)
            acks.append((future, entries[at : at + count] if len(callers) > 1 else entries))
            at += count
        durable = self._flush.flushed_future(end, loop, self._timeout_s)
        if durable.done():
            _acknowledge(acks, durable)
        else:
            durable.add_done_callback(functools.partial(_acknowledge, acks))
        return True
