"""Client-side batching of single sends (Pulsar's batching producer, Kafka's ``linger.ms``).

With ``BatchingOptions`` on a producer, :meth:`AsyncProducer.send` does not make one SendMessage
call per message: sends of the same topic, message type and message group that arrive within
``max_delay_ms`` of the first are sent together in one request (RocketMQ's batch send: one queue,
one result per message), up to ``max_messages`` / ``max_bytes``. Each caller still gets its own
receipt or error. Throughput at many small messages per second goes up by the batch size; each
message waits at most ``max_delay_ms`` more. Transactional sends are never batched.
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

    def __post_init__(self) -> None:
        if self.max_delay_ms < 0 or self.max_messages < 1 or self.max_bytes < 1:
            raise ValueError("batching needs max_delay_ms >= 0, max_messages >= 1 and max_bytes >= 1")


class _Open:
    __slots__ = ("futures", "messages", "size", "timer")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.futures: list[asyncio.Future[SendReceipt]] = []
        self.size = 0
        self.timer: asyncio.TimerHandle | None = None


class SendBatcher:
    """Collects sends per (topic, type, group) and hands each batch to ``send_batch``."""

    def __init__(
        self, options: BatchingOptions, send_batch: Callable[[list[Message]], Awaitable[list[SendReceipt]]]
    ) -> None:
        self.options = options
        self._send_batch = send_batch
        self._open: dict[_Key, _Open] = {}
        self._flights: set[asyncio.Task[None]] = set()
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
            batch.timer = loop.call_later(self.options.max_delay_ms / 1000, self._close, key)
        future: asyncio.Future[SendReceipt] = loop.create_future()
        batch.messages.append(message)
        batch.futures.append(future)
        batch.size += size
        if len(batch.messages) >= self.options.max_messages:
            self._close(key)
        return future

    def _close(self, key: _Key) -> None:
        batch = self._open.pop(key, None)
        if batch is None:
            return
        if batch.timer is not None:
            batch.timer.cancel()
        task = asyncio.ensure_future(self._fly(batch))
        self._flights.add(task)
        task.add_done_callback(self._flights.discard)

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
