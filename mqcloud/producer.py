"""Producers: :class:`AsyncProducer` (asyncio) and :class:`Producer` (blocking, thread-safe).

A send picks a writable queue round-robin, skipping brokers the fault-avoidance table considers
slow or failed (:mod:`mqcloud.fault`); on a retriable error it waits with exponential backoff and
tries again on another broker group. FIFO messages (``message_group``) always go to the queue
``sha256(group) mod n`` and are retried on that same queue.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import itertools
import time
from collections.abc import Iterable, Sequence

from mqcloud._base import BaseClient, endpoint_of
from mqcloud._loop import BlockingClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.backoff import RetryBackoff
from mqcloud.config import ClientConfig
from mqcloud.errors import (
    BadRequestError,
    ForbiddenError,
    IllegalStateError,
    MQClientError,
    PayloadTooLargeError,
    TransportError,
    check_status,
    is_retriable,
)
from mqcloud.fault import LatencyFaultTolerance, select_queue
from mqcloud.message import Message, SendReceipt, generate_message_id

__all__ = ("AsyncProducer", "Producer", "Transaction")

DEFAULT_MAX_BODY = 4 * 1024 * 1024


def fifo_queue(queues: Sequence[pb.MessageQueue], message_group: str) -> pb.MessageQueue:
    """The queue for a message group: sha256(group) mod n, as the official Python client does."""
    h = int.from_bytes(hashlib.sha256(message_group.encode()).digest(), "big")
    return queues[h % len(queues)]


class Transaction:
    """A local transaction: the message sent with it stays invisible until :meth:`commit`;
    :meth:`rollback` discards it. An unresolved one is checked back by the broker (the SDK does not
    answer those checks yet, so the broker rolls it back after its maximum number of checks)."""

    def __init__(self, producer: AsyncProducer) -> None:
        self._producer = producer
        self._sent: list[tuple[str, SendReceipt]] = []

    def _add(self, topic: str, receipt: SendReceipt) -> None:
        if self._sent:
            raise IllegalStateError("a transaction holds one message")
        self._sent.append((topic, receipt))

    async def commit(self) -> None:
        await self._end(pb.TransactionResolution.COMMIT)

    async def rollback(self) -> None:
        await self._end(pb.TransactionResolution.ROLLBACK)

    async def _end(self, resolution: int) -> None:
        p = self._producer
        for topic, r in self._sent:
            req = svc.EndTransactionRequest(
                topic=p.resource(topic),
                message_id=r.message_id,
                transaction_id=r.transaction_id,
                resolution=resolution,  # type: ignore[arg-type]
                source=pb.TransactionSource.SOURCE_CLIENT,
            )
            resp = await p.rpc.unary(r.endpoint, "EndTransaction", req)
            check_status(resp.status)


class AsyncProducer(BaseClient):
    """Send messages from asyncio code::

    async with AsyncProducer(ClientConfig("127.0.0.1:8081", namespace="acme"), topics=["orders"]) as p:
        receipt = await p.send(Message("orders", b"hello", tag="created", keys=["o-1"]))
    """

    client_type = pb.ClientType.PRODUCER

    def __init__(
        self,
        config: ClientConfig,
        topics: Iterable[str] = (),
        *,
        max_attempts: int = 3,
        fault_tolerance: LatencyFaultTolerance | None = None,
    ) -> None:
        super().__init__(config)
        self.topics = list(topics)
        self.max_attempts = max_attempts
        self.backoff = RetryBackoff(max_attempts=max_attempts)
        self.max_body_size = DEFAULT_MAX_BODY
        self.validate_message_type = True
        self.fault = fault_tolerance or LatencyFaultTolerance()
        self._rr = itertools.count()

    def _initial_topics(self) -> Iterable[str]:
        return self.topics

    def _settings(self) -> pb.Settings:
        s = self._base_settings()
        s.publishing.CopyFrom(
            pb.Publishing(
                topics=[self.resource(t) for t in self.topics],
                max_body_size=self.max_body_size,
                validate_message_type=True,
            )
        )
        s.backoff_policy.CopyFrom(pb.RetryPolicy(max_attempts=self.max_attempts))
        return s

    def _apply_settings(self, settings: pb.Settings) -> None:
        if settings.HasField("backoff_policy"):
            # The server's policy sets the waits; the attempt count stays the user's choice.
            b = RetryBackoff.from_pb(settings.backoff_policy, self.backoff)
            self.backoff = RetryBackoff(self.max_attempts, b.initial, b.maximum, b.multiplier, b.customized)
        if settings.HasField("publishing"):
            if settings.publishing.max_body_size > 0:
                self.max_body_size = settings.publishing.max_body_size
            self.validate_message_type = settings.publishing.validate_message_type

    async def send(self, message: Message, transaction: Transaction | None = None) -> SendReceipt:
        receipts = await self._send([message], transaction)
        if transaction is not None:
            transaction._add(message.topic, receipts[0])
        return receipts[0]

    def send_async(self, message: Message) -> asyncio.Task[SendReceipt]:
        """Start sending and return the task (await it, or add a done callback)."""
        return asyncio.ensure_future(self.send(message))

    async def send_batch(self, messages: Sequence[Message]) -> list[SendReceipt]:
        """Send several messages of one topic in one SendMessage request (one queue, one receipt
        per message, in order)."""
        return await self._send(list(messages), None)

    def begin_transaction(self) -> Transaction:
        return Transaction(self)

    async def _send(self, messages: list[Message], transaction: Transaction | None) -> list[SendReceipt]:
        if not messages:
            return []
        topic = messages[0].topic
        if any(m.topic != topic for m in messages):
            raise BadRequestError("a batch must have a single topic")
        groups = {m.message_group for m in messages}
        if len(groups) > 1:
            raise BadRequestError("a batch must have a single message group")
        msg_type = pb.MessageType.TRANSACTION if transaction is not None else messages[0].message_type
        if any(m.message_type != messages[0].message_type for m in messages):
            raise BadRequestError("a batch must have a single message type")
        for m in messages:
            if not m.body:
                raise BadRequestError("message body is empty", 41302)
            if len(m.body) > self.max_body_size:
                raise PayloadTooLargeError(
                    f"message body is {len(m.body)} bytes, the maximum is {self.max_body_size}", 41301
                )

        route = await self._route(topic)
        queues = route.writable()
        if self.validate_message_type:
            typed = [q for q in queues if not q.accept_message_types or msg_type in q.accept_message_types]
            if queues and not typed:
                raise BadRequestError(
                    f"topic {topic} does not accept {pb.MessageType.Name(msg_type)} messages", 40014
                )
            queues = typed
        if not queues:
            raise ForbiddenError(f"topic {topic} has no writable queue", 40300)
        ids = [generate_message_id() for _ in messages]
        group = messages[0].message_group
        avoid: str | None = None
        for attempt in range(1, self.max_attempts + 1):
            if group is not None:
                queue = fifo_queue(queues, group)
            else:
                queue = select_queue(
                    queues, next(self._rr), endpoint_of, lambda q: q.broker.name, self.fault, avoid
                )
            ep = endpoint_of(queue)
            req = svc.SendMessageRequest(
                messages=[
                    m.to_pb(self.config.namespace, i, queue.id, msg_type)
                    for m, i in zip(messages, ids, strict=True)
                ]
            )
            t0 = time.monotonic()
            try:
                resp = await self.rpc.unary(ep, "SendMessage", req)
                check_status(resp.status)
                if len(resp.entries) != len(messages):
                    raise IllegalStateError(f"{len(resp.entries)} send results for {len(messages)} messages")
                for e in resp.entries:
                    check_status(e.status)
            except MQClientError as e:
                latency = (time.monotonic() - t0) * 1000
                self.fault.update(ep, latency, failed=isinstance(e, TransportError))
                if not is_retriable(e) or attempt >= self.max_attempts or transaction is not None:
                    raise
                avoid = queue.broker.name
                await asyncio.sleep(self.backoff.delay(attempt))
                continue
            self.fault.update(ep, (time.monotonic() - t0) * 1000)
            return [
                SendReceipt(
                    message_id=e.message_id or i,
                    offset=e.offset,
                    endpoint=ep,
                    queue_id=queue.id,
                    transaction_id=e.transaction_id,
                    recall_handle=e.recall_handle,
                )
                for e, i in zip(resp.entries, ids, strict=True)
            ]
        raise IllegalStateError("unreachable")  # pragma: no cover


class Producer(BlockingClient[AsyncProducer]):
    _thread_name = "mqcloud-producer"

    """The blocking producer; runs an :class:`AsyncProducer` on a private event-loop thread.

    ``send`` blocks, ``send_async`` returns a :class:`concurrent.futures.Future`. Thread-safe.
    """

    def __init__(
        self,
        config: ClientConfig,
        topics: Iterable[str] = (),
        *,
        max_attempts: int = 3,
        fault_tolerance: LatencyFaultTolerance | None = None,
    ) -> None:
        self._core = AsyncProducer(config, topics, max_attempts=max_attempts, fault_tolerance=fault_tolerance)

    def send(
        self, message: Message, transaction: Transaction | None = None, timeout: float | None = None
    ) -> SendReceipt:
        return self._lt().run(self.core.send(message, transaction), timeout)

    def send_async(self, message: Message) -> concurrent.futures.Future[SendReceipt]:
        return self._lt().submit(self.core.send(message))

    def send_batch(self, messages: Sequence[Message], timeout: float | None = None) -> list[SendReceipt]:
        return self._lt().run(self.core.send_batch(messages), timeout)

    def begin_transaction(self) -> Transaction:
        return self.core.begin_transaction()

    def commit(self, transaction: Transaction) -> None:
        self._lt().run(transaction.commit())

    def rollback(self, transaction: Transaction) -> None:
        self._lt().run(transaction.rollback())
