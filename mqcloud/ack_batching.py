"""Acks sent together: the acks of one (broker, topic) that come while one of its AckMessage calls is
unanswered go out in the next call, all at once.

A push consumer settles every message on its own, and an AckMessage call per message made the acks
the largest part of consuming: one round trip and one RPC's work on both sides for each message.
An AckMessageRequest carries many entries, each answered with a status of its own. This is Nagle's
rule, as the producer's batching applies it (``BatchingOptions.max_in_flight``): with no call of its
key in flight an ack leaves at once (so acks are no later than one by one when they are few), and
while one is in flight the acks of that key collect and leave together when it is answered. An ack
waits at most one round trip more than it would have alone.

Each ack's outcome is its own entry's status: a stale receipt handle fails that ack only. A call
that fails as a whole (the broker unreachable) fails every ack it carried. An ack's outcome goes to
a future its caller awaits (:meth:`AckCoalescer.ack`) or to a function called with it
(:meth:`AckCoalescer.ack_then`): the push consumer settles thousands of messages a second, and a
future and the resumption of the coroutines awaiting it were a large part of its work per message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Union

from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.errors import MULTIPLE_RESULTS, IllegalStateError, check_status

__all__ = ("MAX_ACK_ENTRIES", "AckCoalescer", "Outcome", "check_ack")

#: Entries per AckMessage call (brokers refuse more than 1,024).
MAX_ACK_ENTRIES = 256

Key = tuple[str, str, str]  # (endpoint, the topic's namespace, its name)
#: Called with an ack's outcome: None when the broker acked it, else the error.
Outcome = Callable[[Union[BaseException, None]], None]  # noqa: UP007
Entry = tuple[svc.AckMessageEntry, Union["asyncio.Future[None]", Outcome]]


class _Queue:
    __slots__ = ("busy", "group", "pending", "topic")

    def __init__(self, group: Any, topic: Any) -> None:
        self.group, self.topic = group, topic
        self.pending: list[Entry] = []
        self.busy = False  # an AckMessage call of this key is unanswered


class AckCoalescer:
    """``ack(endpoint, group, topic, entry)`` resolves when the broker answered that entry.

    ``send(endpoint, request)`` makes the call and returns the response (the consumer's RPC client).
    Loop-bound: use it from one event loop.
    """

    def __init__(self, send: Callable[[str, svc.AckMessageRequest], Awaitable[Any]]) -> None:
        self._send = send
        self._queues: dict[Key, _Queue] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def ack(self, endpoint: str, group: Any, topic: Any, entry: svc.AckMessageEntry) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.ack_then(endpoint, group, topic, entry, future)
        await future

    def ack_then(
        self,
        endpoint: str,
        group: Any,
        topic: Any,
        entry: svc.AckMessageEntry,
        outcome: asyncio.Future[None] | Outcome,
    ) -> None:
        """Ack ``entry`` without waiting: ``outcome`` gets its result (a future's result or
        exception is set; a function is called with None or the error, on the loop). A function is
        called exactly once, with ``asyncio.CancelledError`` when the loop is going away."""
        key = (endpoint, topic.resource_namespace, topic.name)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue(group, topic)
        queue.pending.append((entry, outcome))
        if not queue.busy:
            self._start(endpoint, queue)

    def _start(self, endpoint: str, queue: _Queue) -> None:
        batch, queue.pending = queue.pending[:MAX_ACK_ENTRIES], queue.pending[MAX_ACK_ENTRIES:]
        queue.busy = True
        task = asyncio.get_running_loop().create_task(self._call(endpoint, queue, batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, endpoint: str, queue: _Queue, batch: list[Entry]) -> None:
        go_on = True
        try:
            entries = [e for e, _ in batch]
            request = svc.AckMessageRequest(group=queue.group, topic=queue.topic, entries=entries)
            try:
                response = await self._send(endpoint, request)
            except Exception as exc:  # noqa: BLE001 - the call failed as a whole: every ack with it
                for _, outcome in batch:
                    _tell(outcome, exc)
                return
            _settle(batch, response)
        except asyncio.CancelledError as cancelled:  # the loop is going away: so are the acks' waiters
            go_on = False
            left, queue.pending = batch + queue.pending, []
            for _, outcome in left:
                if isinstance(outcome, asyncio.Future):
                    outcome.cancel()
                else:
                    _tell(outcome, cancelled)
            raise
        finally:
            queue.busy = False
            if go_on and queue.pending:
                self._start(endpoint, queue)

    async def close(self, wait_s: float = 10.0) -> None:
        """Wait up to ``wait_s`` for the calls under way and those still to go (their acks'
        waiters are answered either way); what is left then is cancelled."""
        deadline = asyncio.get_running_loop().time() + wait_s
        while self._tasks:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                for task in list(self._tasks):
                    task.cancel()
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
                return
            await asyncio.wait(list(self._tasks), timeout=left)


def check_ack(response: Any, index: int, count: int) -> None:
    """Raise the error of the ``index``-th of ``count`` acks an AckMessage answer says. An answer
    without one entry per ack is taken whole: its status when OK or an error, and an error when it
    says some entries failed without saying which."""
    results = response.entries
    if len(results) == count:
        check_status(results[index].status)
    elif response.status.code == MULTIPLE_RESULTS:
        raise IllegalStateError(f"ack answer has {len(results)} entries for {count} acks", 0)
    else:
        check_status(response.status)


def _tell(outcome: asyncio.Future[None] | Outcome, error: BaseException | None) -> None:
    """Hand one ack's outcome to its future (unless its waiter was cancelled) or function."""
    if not isinstance(outcome, asyncio.Future):
        outcome(error)
    elif outcome.done():
        pass
    elif error is None:
        outcome.set_result(None)
    else:
        outcome.set_exception(error)


def _settle(batch: list[Entry], response: Any) -> None:
    """Each ack gets its entry's status (:func:`check_ack`)."""
    count = len(batch)
    for i, (_, outcome) in enumerate(batch):
        try:
            check_ack(response, i, count)
        except Exception as exc:  # noqa: BLE001 - handed to this ack's outcome
            _tell(outcome, exc)
        else:
            _tell(outcome, None)
