"""Producers: :class:`AsyncProducer` (asyncio) and :class:`Producer` (blocking, thread-safe).

A send picks a writable queue round-robin, skipping brokers the fault-avoidance table considers
slow or failed (:mod:`mqcloud.fault`); on a retriable error it waits with exponential backoff and
tries again on another broker group. FIFO messages (``message_group``) always go to the queue
``sha256(group) mod n`` and are retried on that same queue. With ``batching``
(:class:`~mqcloud.batching.BatchingOptions`) concurrent sends of one topic are coalesced into batch
requests (:mod:`mqcloud.batching`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import hashlib
import inspect
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mqcloud._base import BaseClient, endpoint_of
from mqcloud._loop import BlockingClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.backoff import RetryBackoff
from mqcloud.batching import BatchingOptions, SendBatcher
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
from mqcloud.message import Message, MessageView, SendReceipt, generate_message_id
from mqcloud.route import TopicRoute

__all__ = ("AsyncProducer", "Producer", "Transaction", "TransactionChecker", "TransactionResolution")

log = logging.getLogger("mqcloud.producer")


class TransactionResolution(enum.Enum):
    """What a :data:`TransactionChecker` decides about a half message the broker asks about."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    # Not decided yet: no answer; the broker asks again later (and rolls back after its maximum).
    UNKNOWN = "UNKNOWN"


# Called with the half message when the broker checks back an unresolved transaction; plain
# functions run in a worker thread, coroutine functions on the client's loop.
TransactionChecker = Callable[[MessageView], "TransactionResolution | Awaitable[TransactionResolution]"]

DEFAULT_MAX_BODY = 4 * 1024 * 1024


def fifo_queue(queues: Sequence[pb.MessageQueue], message_group: str) -> pb.MessageQueue:
    """The queue for a message group: sha256(group) mod n, as the official Python client does."""
    h = int.from_bytes(hashlib.sha256(message_group.encode()).digest(), "big")
    return queues[h % len(queues)]


class Transaction:
    """A local transaction: the message sent with it stays invisible until :meth:`commit`;
    :meth:`rollback` discards it. An unresolved one is checked back by the broker (the SDK does not
    answers them only when it has a ``transaction_checker``; else the broker rolls it back after its
    maximum number of checks)."""

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
        transaction_checker: TransactionChecker | None = None,
        batching: BatchingOptions | None = None,
    ) -> None:
        super().__init__(config)
        self.topics = list(topics)
        self.batcher = SendBatcher(batching, self.send_batch) if batching is not None else None
        self.transaction_checker = transaction_checker
        self.max_attempts = max_attempts
        self.backoff = RetryBackoff(max_attempts=max_attempts)
        self.max_body_size = DEFAULT_MAX_BODY
        self.validate_message_type = True
        self.fault = fault_tolerance or LatencyFaultTolerance()
        self._rr = itertools.count()

    def _initial_topics(self) -> Iterable[str]:
        return self.topics

    def _orphan_handler(self) -> Any:
        return self._check_orphan if self.transaction_checker is not None else None

    async def _check_orphan(self, endpoint: str, command: svc.RecoverOrphanedTransactionCommand) -> None:
        """Ask the checker about a half message and answer the broker with EndTransaction."""
        checker = self.transaction_checker
        assert checker is not None
        view = MessageView.from_pb(command.message, endpoint)
        try:
            if inspect.iscoroutinefunction(checker):
                decision = await checker(view)
            else:
                decision = await asyncio.to_thread(checker, view)
                if inspect.isawaitable(decision):
                    decision = await decision
        except Exception:  # a failing checker is the user's; the broker asks again
            log.exception("transaction checker failed for %s", view.message_id)
            return
        if decision not in (TransactionResolution.COMMIT, TransactionResolution.ROLLBACK):
            return
        resolution = (
            pb.TransactionResolution.COMMIT
            if decision is TransactionResolution.COMMIT
            else pb.TransactionResolution.ROLLBACK
        )
        req = svc.EndTransactionRequest(
            topic=command.message.topic,
            message_id=view.message_id,
            transaction_id=command.transaction_id,
            resolution=resolution,
            source=pb.TransactionSource.SOURCE_SERVER_CHECK,
        )
        try:
            resp = await self.rpc.unary(endpoint, "EndTransaction", req)
            check_status(resp.status)
        except MQClientError as e:
            log.warning("answering the check of %s failed: %s", view.message_id, e)

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
        if self.batcher is not None and transaction is None:
            self._check_body(message)  # a bad message fails alone, not the batch it would join
            return await self.batcher.add(message)
        receipts = await self._send([message], transaction)
        if transaction is not None:
            transaction._add(message.topic, receipts[0])
        return receipts[0]

    def send_async(self, message: Message) -> asyncio.Future[SendReceipt]:
        """Start sending and return a future of the receipt (await it, or add a done callback).

        With batching the future is the one the batch answers: no task per message (a task and its
        coroutine cost about as much of the caller's CPU as the batcher itself). A body the producer
        refuses fails the future, as it fails :meth:`send`."""
        if self.batcher is None:
            return asyncio.ensure_future(self.send(message))
        try:
            self._check_body(message)
        except MQClientError as exc:
            refused: asyncio.Future[SendReceipt] = asyncio.get_running_loop().create_future()
            refused.set_exception(exc)
            return refused
        return self.batcher.add(message)

    async def send_batch(self, messages: Sequence[Message]) -> list[SendReceipt]:
        """Send several messages of one topic in one SendMessage request (one queue, one receipt
        per message, in order)."""
        return await self._send(list(messages), None)

    def begin_transaction(self) -> Transaction:
        return Transaction(self)

    async def flush(self) -> None:
        """With batching: send what is collected now and wait until every batch is answered."""
        if self.batcher is not None:
            await self.batcher.flush()

    async def shutdown(self) -> None:
        await self.flush()
        await super().shutdown()

    def _check_body(self, m: Message) -> None:
        if not m.body:
            raise BadRequestError("message body is empty", 41302)
        if len(m.body) > self.max_body_size:
            raise PayloadTooLargeError(
                f"message body is {len(m.body)} bytes, the maximum is {self.max_body_size}", 41301
            )

    async def recall(self, topic: str, receipt: SendReceipt | str) -> str:
        """Cancel a pending delay message; returns its message id.

        ``receipt`` is the :class:`SendReceipt` of the send (its broker is asked) or the bare
        recall handle (the topic's brokers are asked in turn; a broker that did not sign the
        handle answers BAD_REQUEST). Raises :class:`NotFoundError` once the message was delivered
        or recalled already.
        """
        if isinstance(receipt, SendReceipt):
            if not receipt.recall_handle:
                raise BadRequestError("this message has no recall handle (it is not a delay message)")
            handle, endpoints = receipt.recall_handle, [receipt.endpoint]
        else:
            route = await self._route(topic)
            handle, endpoints = receipt, list(dict.fromkeys(endpoint_of(q) for q in route.writable()))
        if not handle:
            raise BadRequestError("the recall handle is empty")
        req = svc.RecallMessageRequest(topic=self.resource(topic), recall_handle=handle)
        refused: BadRequestError | None = None
        for endpoint in endpoints:
            resp = await self.rpc.unary(endpoint, "RecallMessage", req)
            try:
                check_status(resp.status)
            except BadRequestError as e:  # signed by another broker of the topic: ask the next one
                refused = e
                continue
            return str(resp.message_id)
        raise refused or ForbiddenError(f"topic {topic} has no writable queue", 40300)

    def _queues_for(self, topic: str, route: TopicRoute, msg_type: int) -> list[pb.MessageQueue]:
        """The route's writable queues that accept ``msg_type``; a clear error when there are none."""
        key = (msg_type, self.validate_message_type)  # the broker's settings may turn validation off
        cached = route.typed_writable.get(key)
        if cached is not None:
            return cached
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
        route.typed_writable[key] = queues
        return queues

    def _checked(self, messages: list[Message], transaction: Transaction | None) -> int:
        """The message type of a send of ``messages`` (one topic, group and type); raises when the
        messages cannot go together or one of them is refused before sending."""
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
            self._check_body(m)
        return msg_type

    def _attempts(
        self, messages: list[Message], msg_type: int, route: TopicRoute, transactional: bool
    ) -> Generator[_Call | _Retry, Any, list[SendReceipt]]:
        """The attempts of one send, as steps for a driver to carry out (:meth:`_send` on the loop,
        or the blocking :class:`Producer` on the caller's thread), so both make the same choices.

        Each :class:`_Call` is answered with the SendMessage response, or with the call's
        :class:`MQClientError` thrown in; each :class:`_Retry` (after its ``delay``) with the topic's
        route asked for again, or None when that failed. Returns the receipts."""
        topic = messages[0].topic
        queues = self._queues_for(topic, route, msg_type)
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
            req = svc.SendMessageRequest()
            add = req.messages.add  # each message written in place, not built and then copied in
            for m, i in zip(messages, ids, strict=True):
                m.fill_pb(add(), self.config.namespace, i, queue.id, msg_type)
            t0 = time.monotonic()
            try:
                resp = yield _Call(ep, req)
                check_status(resp.status)
                if len(resp.entries) != len(messages):
                    raise IllegalStateError(f"{len(resp.entries)} send results for {len(messages)} messages")
                for e in resp.entries:
                    check_status(e.status)
            except MQClientError as e:
                latency = (time.monotonic() - t0) * 1000
                self.fault.update(ep, latency, failed=isinstance(e, TransportError))
                if not is_retriable(e) or attempt >= self.max_attempts or transactional:
                    raise
                avoid = queue.broker.name
                # The queue's broker may have failed over (HA: a replica became the master):
                # ask the access point again rather than wait for the periodic route refresh.
                fresh = yield _Retry(self.backoff.delay(attempt))
                if fresh is not None:
                    queues = self._queues_for(topic, fresh, msg_type)
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

    async def _fresh_route(self, topic: str) -> TopicRoute | None:
        """The topic's route asked for again (a retry's), or None when that failed."""
        with contextlib.suppress(MQClientError):
            fresh = await self.routes.fetch(topic)
            await self._ensure_sessions(fresh.endpoints())
            return fresh
        return None

    async def _send(self, messages: list[Message], transaction: Transaction | None) -> list[SendReceipt]:
        if not messages:
            return []
        msg_type = self._checked(messages, transaction)
        topic = messages[0].topic
        steps = self._attempts(messages, msg_type, await self._route(topic), transaction is not None)
        step = _advance(steps, None, None)
        while not isinstance(step, list):
            answer: Any = None
            failure: MQClientError | None = None
            if isinstance(step, _Call):
                try:
                    answer = await self.rpc.unary(step.endpoint, "SendMessage", step.request)
                except MQClientError as e:
                    failure = e
            else:
                await asyncio.sleep(step.delay)
                answer = await self._fresh_route(topic)
            step = _advance(steps, answer, failure)
        return step


@dataclass(frozen=True, slots=True)
class _Call:
    """An attempt's SendMessage call."""

    endpoint: str
    request: svc.SendMessageRequest


@dataclass(frozen=True, slots=True)
class _Retry:
    """Wait ``delay`` seconds, then ask for the topic's route again."""

    delay: float


def _advance(
    steps: Generator[_Call | _Retry, Any, list[SendReceipt]], answer: Any, failure: MQClientError | None
) -> _Call | _Retry | list[SendReceipt]:
    """The next step of a send's attempts, given how the last one went; its receipts once done."""
    try:
        return steps.send(answer) if failure is None else steps.throw(failure)
    except StopIteration as done:
        return list(done.value)


class Producer(BlockingClient[AsyncProducer]):
    """The blocking producer, over an :class:`AsyncProducer` on a private event-loop thread.

    ``send`` and ``send_batch`` block, and make their calls on the caller's thread (gRPC's blocking
    API) unless the producer batches or the send is transactional; ``send_async`` returns a
    :class:`concurrent.futures.Future` and goes through the loop. Thread-safe.
    """

    _thread_name = "mqcloud-producer"

    def __init__(
        self,
        config: ClientConfig,
        topics: Iterable[str] = (),
        *,
        max_attempts: int = 3,
        fault_tolerance: LatencyFaultTolerance | None = None,
        transaction_checker: TransactionChecker | None = None,
        batching: BatchingOptions | None = None,
    ) -> None:
        self._core = AsyncProducer(
            config,
            topics,
            max_attempts=max_attempts,
            fault_tolerance=fault_tolerance,
            transaction_checker=transaction_checker,
            batching=batching,
        )

    def send(
        self, message: Message, transaction: Transaction | None = None, timeout: float | None = None
    ) -> SendReceipt:
        """Send and wait for the receipt. Without batching or a transaction the call is made on this
        thread (:mod:`mqcloud._blocking_rpc`); ``timeout`` bounds the whole send, retries included
        (:class:`TimeoutError` past it)."""
        core = self.core
        if transaction is not None or core.batcher is not None:
            return self._lt().run(core.send(message, transaction), timeout)
        return self._send_here([message], timeout)[0]

    def send_async(self, message: Message) -> concurrent.futures.Future[SendReceipt]:
        return self._lt().submit(self.core.send(message))

    def send_batch(self, messages: Sequence[Message], timeout: float | None = None) -> list[SendReceipt]:
        """Send several messages of one topic in one request (see :meth:`AsyncProducer.send_batch`),
        on this thread."""
        return self._send_here(list(messages), timeout)

    def _send_here(self, messages: list[Message], timeout: float | None) -> list[SendReceipt]:
        """Carry out :meth:`AsyncProducer._attempts` on this thread: calls on gRPC's blocking API,
        waits with ``time.sleep``; only a route not cached yet is asked for on the loop."""
        calls = self._direct()
        core = self.core
        if not messages:
            return []
        msg_type = core._checked(messages, None)
        topic = messages[0].topic
        end = None if timeout is None else time.monotonic() + timeout
        route = core.routes.peek(topic) or self._lt().run(core._route(topic), timeout)
        steps = core._attempts(messages, msg_type, route, False)
        step = _advance(steps, None, None)
        while not isinstance(step, list):
            answer: Any = None
            failure: MQClientError | None = None
            deadline = core.config.request_timeout
            if end is not None:
                deadline = min(deadline, end - time.monotonic())
                if deadline <= 0:
                    steps.close()
                    raise TimeoutError(f"the send did not finish within {timeout} s")
            if isinstance(step, _Call):
                try:
                    answer = calls.unary(step.endpoint, "SendMessage", step.request, deadline)
                except MQClientError as e:
                    failure = e
            else:
                time.sleep(min(step.delay, deadline))
                answer = self._lt().run(core._fresh_route(topic), deadline)
            step = _advance(steps, answer, failure)
        return step

    def begin_transaction(self) -> Transaction:
        return self.core.begin_transaction()

    def flush(self, timeout: float | None = None) -> None:
        """With batching: send what is collected now and wait for the answers."""
        self._lt().run(self.core.flush(), timeout)

    def recall(self, topic: str, receipt: SendReceipt | str, timeout: float | None = None) -> str:
        """Cancel a pending delay message (see :meth:`AsyncProducer.recall`); its message id."""
        return self._lt().run(self.core.recall(topic, receipt), timeout)

    def commit(self, transaction: Transaction) -> None:
        self._lt().run(transaction.commit())

    def rollback(self, transaction: Transaction) -> None:
        self._lt().run(transaction.rollback())
