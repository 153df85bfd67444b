"""Client-side batching of single sends (Pulsar's batching producer, Kafka's ``linger.ms``).

With ``BatchingOptions`` on a producer, :meth:`AsyncProducer.send` does not make one SendMessage
call per message: sends of the same topic, message type and message group that arrive within
``max_delay_ms`` of the first are sent together in one request (RocketMQ's batch send: one queue,
one result per message), up to ``max_messages`` / ``max_bytes``. Each caller still gets its own
receipt or error. Throughput at many small messages per second goes up by the batch size; each
message waits at most ``max_delay_ms`` more. Transactional sends are never batched.

A batch whose delay ran out leaves only while fewer than ``max_in_flight`` batches of its key are
unanswered (Nagle's rule, per key); otherwise it goes on collecting and leaves when one of them is
answered, or when it is full (a full batch never waits). A loaded broker answers more slowly, so
batches grow and calls get fewer, instead of small calls queueing up behind each other, each costing
the broker and the client their per-call work. The price: with a slow round trip and few messages, a
message may wait up to one round trip more; a larger ``max_in_flight`` bounds how often.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable

from mqcloud.message import Message, SendReceipt

__all__ = ("BatchingOptions", "SendBatcher")

_Key = tuple[str, int, str | None]  # topic, message type, message group


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    max_delay_ms: float = 1.0
    max_messages: int = 128
    max_bytes: int = 1 << 20
    max_in_flight: int = 1

    def __post_init__(self) -> None:
        if self.max_delay_ms < 0 or min(self.max_messages, self.max_bytes, self.max_in_flight) < 1:
            raise ValueError(
                "batching needs max_delay_ms >= 0 and max_messages, max_bytes, max_in_flight >= 1"
            )


class _Open:
    __slots__ = ("due", "futures", "messages", "size", "timer")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.futures: list[asyncio.Future[SendReceipt]] = []
        self.size = 0
        self.timer: asyncio.TimerHandle | None = None
        self.due = False  # its delay ran out while max_in_flight batches were unanswered


class SendBatcher:
    """Collects sends per (topic, type, group) and hands each batch to ``send_batch``."""

    def __init__(
        self, options: BatchingOptions, send_batch: Callable[[list[Message]], Awaitable[list[SendReceipt]]]
    ) -> None:
        self.options = options
        self._send_batch = send_batch
        self._open: dict[_Key, _Open] = {}
        self._flights: set[asyncio.Task[None]] = set()
        self._in_flight: dict[_Key, int] = {}
        self.batches_sent = 0

    def add(self, message: Message) -> asyncio.Future[SendReceipt]:
        loop = asyncio.get_running_loop()
        key = (message.topic, message.message_type, message.message_group)
        size = len(message.body)
        batch = self._open.get(key)
        if batch is not None and batch.size + size > self.options.max_bytes:
            self._close(key)
            batch = None
        if batch is None:
            batch = self._open[key] = _Open()
            batch.timer = loop.call_later(self.options.max_delay_ms / 1000, self._delay_over, key)
        future: asyncio.Future[SendReceipt] = loop.create_future()
        batch.messages.append(message)
        batch.futures.append(future)
        batch.size += size
        if len(batch.messages) >= self.options.max_messages:
            self._close(key)
        return future

    def _delay_over(self, key: _Key) -> None:
        batch = self._open.get(key)
        if batch is None:
            return
        if self._in_flight.get(key, 0) >= self.options.max_in_flight:
            batch.due = True  # leaves when a batch in flight is answered (_landed)
        else:
            self._close(key)

    def _close(self, key: _Key) -> None:
        """Send the open batch of ``key`` now (full, delay over with room in flight, or flushed)."""
        batch = self._open.pop(key, None)
        if batch is None:
            return
        if batch.timer is not None:
            batch.timer.cancel()
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        task = asyncio.ensure_future(self._fly(batch))
        self._flights.add(task)
        task.add_done_callback(self._flights.discard)
        task.add_done_callback(lambda _: self._landed(key))

    def _landed(self, key: _Key) -> None:
        left = self._in_flight[key] - 1
        if left:
            self._in_flight[key] = left
        else:
            del self._in_flight[key]
        batch = self._open.get(key)
        if batch is not None and batch.due:
            self._close(key)

    async def _fly(self, batch: _Open) -> None:
        self.batches_sent += 1
        try:
            receipts = await self._send_batch(batch.messages)
        except BaseException as exc:  # every caller of the batch gets the error
            for future in batch.futures:
                if not future.done():
                    future.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for future, receipt in zip(batch.futures, receipts, strict=True):
            if not future.done():
                future.set_result(receipt)

    async def flush(self) -> None:
        """Send what is collected now and wait for every batch in flight."""
        for key in list(self._open):
            self._close(key)
        if self._flights:
            await asyncio.gather(*list(self._flights), return_exceptions=True)
