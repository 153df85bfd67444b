"""Push consumers: the SDK receives, calls your listener on a pool of ``consumption_threads``, and
acks on :attr:`ConsumeResult.SUCCESS`. On FAILURE (or an exception) the message is made visible
again after the group's backoff delay (``ChangeInvisibleDuration``); once it has been delivered
``max_attempts`` times it is forwarded to the dead-letter queue. FIFO groups consume one message at a
time per assigned queue and retry locally, so order is kept.

Receiving: ``receives_per_queue`` receives (long polls) are kept open at once per assigned queue
(one for FIFO groups); brokers assign a whole topic as one queue, and one receive at a time left the
consumer waiting for each batch to stream in.

Receives of a non-FIFO group are made on gRPC's blocking API, on threads of their own
(``mqcloud-receive``, each kept for the next receive), and each hands its messages to the event loop
at once: reading a receive's streamed responses through grpc.aio cost a response's round trip through
gRPC's polling thread and the loop each, a large share of the consumer's CPU per message. A receive
whose loop is cancelled cancels its call, so the broker keeps nothing for it and its messages come
back after their invisible time; if its stream had already ended, its messages are consumed anyway
(the broker renews them for this client). FIFO groups receive on the loop: their messages are
consumed in order by the loop that received them.

Flow control: receiving pauses while the messages received but not yet acked/nacked exceed
``max_cache_message_count`` or ``max_cache_message_size_bytes``. The count bound is strict (each
receive reserves the room it asks for); the byte bound is enforced by estimating the room in
messages from the average size seen so far, so it can be overshot by the first batch or by
messages larger than the average.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import inspect
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from queue import SimpleQueue
from typing import Any, Union

from mqcloud._blocking_rpc import BlockingRpc
from mqcloud._consumer import ConsumerBase
from mqcloud._loop import BlockingClient
from mqcloud.ack_batching import Outcome
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.backoff import RetryBackoff
from mqcloud.config import ClientConfig, endpoints_key
from mqcloud.errors import (
    ForbiddenError,
    InternalError,
    MQClientError,
    TransportError,
    check_status,
)
from mqcloud.message import FilterExpression, MessageView

__all__ = ("AsyncPushConsumer", "ConsumeResult", "MessageListener", "PushConsumer")

log = logging.getLogger("mqcloud.push_consumer")

ASSIGNMENT_SECONDS = 5.0
RECEIVE_ERROR_PAUSE = 1.0
ACK_ATTEMPTS = 3  # tries of an ack whose call was lost (:meth:`AsyncPushConsumer._ack_retrying`)

# The broker's default when its settings reply carries no policy (RocketMQ's 1s ... 2h ladder).
DEFAULT_CONSUMER_BACKOFF = RetryBackoff(
    max_attempts=17,
    customized=(1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200),
)


class ConsumeResult(enum.Enum):
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"


MessageListener = Callable[[MessageView], Union[ConsumeResult, Awaitable[ConsumeResult]]]  # noqa: UP007


class _Receiver:
    """A daemon thread that makes receives, one at a time, each handed to it by :meth:`submit`; its
    outcome lands in the future returned. A daemon, not an executor's worker: those are joined at
    exit, and a consumer never shut down would hold up the interpreter's exit for a receive's long
    poll. Kept for the next receive rather than a thread started per receive: starting and ending
    one cost about a seventh of the consumer's CPU per message. It ends when closed, or after its
    receive once ``closing`` is set."""

    def __init__(self, closing: threading.Event) -> None:
        self._closing = closing
        self._work: SimpleQueue[tuple[Any, ...] | None] = SimpleQueue()
        threading.Thread(target=self._run, name="mqcloud-receive", daemon=True).start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._work.put((loop, future, fn, args))
        return future

    def close(self) -> None:
        self._work.put(None)

    def _run(self) -> None:
        while (work := self._work.get()) is not None:
            loop, future, fn, args = work
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the future
                outcome = (False, exc)
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_settle, future, *outcome)
            if self._closing.is_set():
                return


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class _Stream:
    """The call of a receive made on another thread, to cancel from the loop (thread-safe)."""

    __slots__ = ("_call", "_cancelled", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._call: Any = None  # gRPC's blocking stream call (its cancel() is untyped)
        self._cancelled = False

    def attach(self, call: Any) -> None:
        with self._lock:
            self._call = call
            cancelled = self._cancelled
        if cancelled:
            call.cancel()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            call = self._call
        if call is not None:
            call.cancel()


class AsyncPushConsumer(ConsumerBase):
    """``listener(message) -> ConsumeResult`` may be a plain function (run on a thread pool of
    ``consumption_threads``) or a coroutine function (at most ``consumption_threads`` at once)."""

    client_type = pb.ClientType.PUSH_CONSUMER
    settings_wait = 10.0

    def __init__(
        self,
        config: ClientConfig,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str],
        listener: MessageListener,
        *,
        consumption_threads: int = 20,
        max_cache_message_count: int = 1024,
        max_cache_message_size_bytes: int = 64 * 1024 * 1024,
        invisible_duration: float = 30.0,
        receives_per_queue: int = 4,
    ) -> None:
        super().__init__(config, group, subscriptions)
        if consumption_threads < 1 or max_cache_message_count < 1 or max_cache_message_size_bytes < 1:
            raise ValueError("consumption_threads and cache bounds must be positive")
        if receives_per_queue < 1:
            raise ValueError("receives_per_queue must be positive")
        # Receives kept open at once per assigned queue (FIFO groups: one). A broker assigns a whole
        # topic as one queue (id -1); with one receive at a time the consumer waited for each batch
        # to stream in before asking for the next, and neither side was busy.
        self.receives_per_queue = receives_per_queue
        self.listener = listener
        self.consumption_threads = consumption_threads
        self.max_cache_message_count = max_cache_message_count
        self.max_cache_message_size_bytes = max_cache_message_size_bytes
        self.invisible_duration = invisible_duration
        self.backoff = DEFAULT_CONSUMER_BACKOFF
        self.receive_batch_size = 32
        self.long_polling_timeout = 20.0
        self.fifo = False
        self.cached_message_count = 0
        self.cached_message_bytes = 0
        self._reserved = 0  # room asked for by receives under way (the count bound stays strict)
        self._avg_size = 0.0
        # receive loops waiting for room in the cache (woken together when it changes)
        self._room_waiters: list[asyncio.Future[None]] = []
        self._sem = asyncio.Semaphore(consumption_threads)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._loops: dict[tuple[str, int, str, int], asyncio.Task[None]] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self._direct: BlockingRpc | None = None  # the receives' blocking channels (non-FIFO groups)
        self._receivers: list[_Receiver] = []  # receive threads waiting for their next receive
        self._receivers_closing = threading.Event()
        self._stopping = False

    def _settings(self) -> pb.Settings:
        s = self._base_settings()
        s.subscription.CopyFrom(self._subscription())
        return s

    def _apply_settings(self, settings: pb.Settings) -> None:
        if settings.HasField("backoff_policy"):
            self.backoff = RetryBackoff.from_pb(settings.backoff_policy, DEFAULT_CONSUMER_BACKOFF)
        if settings.HasField("subscription"):
            sub = settings.subscription
            if sub.receive_batch_size > 0:
                self.receive_batch_size = sub.receive_batch_size
            if sub.HasField("long_polling_timeout") and sub.long_polling_timeout.ToNanoseconds() > 0:
                self.long_polling_timeout = sub.long_polling_timeout.ToNanoseconds() / 1e9
            self.fifo = sub.fifo

    async def start(self) -> None:
        self._sem = asyncio.Semaphore(self.consumption_threads)
        self._room_waiters = []
        self._receivers_closing = threading.Event()
        self._direct = BlockingRpc(self.config, self.client_id)
        if not inspect.iscoroutinefunction(self.listener):
            self._executor = concurrent.futures.ThreadPoolExecutor(
                self.consumption_threads, thread_name_prefix="mqcloud-consume"
            )
        await super().start()
        await self._refresh_assignments()
        self._spawn(self._assignment_loop())

    # --- assignments ------------------------------------------------------------------------
    async def _assignment_loop(self) -> None:
        while True:
            await asyncio.sleep(ASSIGNMENT_SECONDS)
            await self._refresh_assignments()

    async def _refresh_assignments(self) -> None:
        for topic in list(self.subscriptions):
            try:
                queues = await self._query_assignment(topic)
            except MQClientError as e:
                log.warning("QueryAssignment for %s failed: %s", topic, e)
                continue
            loops = 1 if self.fifo else self.receives_per_queue
            wanted = {
                (topic, q.id, endpoints_key(q.broker.endpoints), i): q for q in queues for i in range(loops)
            }
            for key, task in list(self._loops.items()):
                if key[0] == topic and key not in wanted:
                    task.cancel()
                    del self._loops[key]
            for key, q in wanted.items():
                if key not in self._loops:
                    self._loops[key] = self._spawn(self._receive_loop(topic, q))

    async def _query_assignment(self, topic: str) -> list[pb.MessageQueue]:
        route = await self._route(topic)
        endpoints = sorted(route.endpoints())
        if not endpoints:
            raise ForbiddenError(f"topic {topic} has no broker", 40300)
        req = svc.QueryAssignmentRequest(
            topic=self.resource(topic), group=self._group(), endpoints=self.config.access_point()
        )
        resp = await self.rpc.unary(endpoints[0], "QueryAssignment", req)
        check_status(resp.status)
        return [
            a.message_queue
            for a in resp.assignments
            if a.message_queue.permission in (pb.Permission.READ, pb.Permission.READ_WRITE)
        ]

    # --- receive / flow control -------------------------------------------------------------
    def _room(self) -> int:
        """How many more messages may be received now (0 = wait)."""
        if self.cached_message_bytes >= self.max_cache_message_size_bytes:
            return 0
        room = self.max_cache_message_count - self.cached_message_count - self._reserved
        if self._avg_size == 0:  # sizes unknown: one receive at a time
            return 0 if self._reserved else room
        # the byte room in messages, estimated from the sizes seen so far; with no receive under
        # way at least one, so receiving never stalls below the byte bound
        free_bytes = self.max_cache_message_size_bytes - self.cached_message_bytes
        byte_room = int(free_bytes // self._avg_size) - self._reserved
        return min(room, byte_room if self._reserved else max(1, byte_room))

    async def _wait_room(self) -> None:
        """Until :meth:`_room` is positive (loop-bound: nothing can take the room before the
        caller's next await)."""
        while self._room() <= 0:
            waiter = asyncio.get_running_loop().create_future()
            self._room_waiters.append(waiter)
            try:
                await waiter
            finally:
                if not waiter.done():  # cancelled: no longer waiting
                    self._room_waiters.remove(waiter)

    def _room_changed(self) -> None:
        """Wake the receive loops waiting for room; each checks again."""
        waiters, self._room_waiters = self._room_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _receive(self, queue: pb.MessageQueue, req: svc.ReceiveMessageRequest) -> list[MessageView]:
        """One receive: on a receive thread with gRPC's blocking API (see the module docstring), on
        the loop for FIFO groups."""
        if self.fifo or self._direct is None:
            return await super()._receive(queue, req)
        stream = _Stream()
        receiver = self._receivers.pop() if self._receivers else _Receiver(self._receivers_closing)
        done = receiver.submit(self._receive_here, queue, req, stream)
        done.add_done_callback(lambda _: self._receiver_free(receiver))
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            stream.cancel()
            done.add_done_callback(self._received_anyway)
            raise

    def _receiver_free(self, receiver: _Receiver) -> None:
        """``receiver``'s receive is over: it waits for the next one, or ends if shutting down."""
        if self._receivers_closing.is_set():
            receiver.close()
        else:
            self._receivers.append(receiver)

    def _receive_here(
        self, queue: pb.MessageQueue, req: svc.ReceiveMessageRequest, stream: _Stream
    ) -> list[MessageView]:
        assert self._direct is not None
        return self._receive_blocking(self._direct, queue, req, stream.attach)

    def _received_anyway(self, done: asyncio.Future[list[MessageView]]) -> None:
        """A receive whose loop was cancelled after its stream had ended: its messages are this
        client's (renewed for it by the broker), so they are consumed, unless it is shutting down
        (then the broker stops renewing them and they come back after their invisible time)."""
        if done.cancelled() or done.exception() is not None or self._stopping:
            return
        self._accept(done.result())

    def _accept(self, messages: list[MessageView]) -> None:
        """Count received messages into the cache and start consuming them (not FIFO: the receive
        loop consumes those in order)."""
        if not messages:
            return
        size = sum(len(m.body) for m in messages)
        self.cached_message_count += len(messages)
        self.cached_message_bytes += size
        batch_avg = size / len(messages)
        self._avg_size = batch_avg if self._avg_size == 0 else 0.8 * self._avg_size + 0.2 * batch_avg
        if not self.fifo:
            for m in messages:
                # out of the set when it ends (_consume's last step; no done-callback per task)
                self._inflight.add(asyncio.create_task(self._consume(m)))

    async def _receive_loop(self, topic: str, queue: pb.MessageQueue) -> None:
        # kept while a receive fails: the broker answers the retry with what the lost try took
        attempt_id = str(uuid.uuid4())
        while True:
            await self._wait_room()
            batch = min(self.receive_batch_size, self._room())
            self._reserved += batch
            messages: list[MessageView] | None = None
            try:  # the reservation ends with the receive, whatever ends it (cancellation too)
                flt = self.subscriptions.get(topic)
                if flt is None:  # unsubscribed meanwhile
                    return
                request = self._receive_request(
                    queue,
                    flt,
                    batch,
                    self.invisible_duration,
                    self.long_polling_timeout,
                    auto_renew=True,
                    attempt_id=attempt_id,
                )
                messages = await self._receive(queue, request)
                attempt_id = str(uuid.uuid4())
            except MQClientError as e:
                if not (isinstance(e, TransportError) and e.grpc_code == "DEADLINE_EXCEEDED"):
                    log.warning("receive from %s failed: %s", topic, e)
            finally:
                # no await from here to the tasks below: the room given back and the messages
                # counted in are seen together by the other receive loops
                self._reserved -= batch
            if messages:
                self._accept(messages)
            self._room_changed()  # what the receive did not fill is room again
            if messages is None:
                await asyncio.sleep(RECEIVE_ERROR_PAUSE)
            elif self.fifo:
                for m in messages:
                    await self._consume_fifo(m)

    def _release(self, m: MessageView) -> None:
        """``m`` is settled (acked, nacked or forwarded, or given up on): out of the cache."""
        self.cached_message_count -= 1
        self.cached_message_bytes -= len(m.body)
        if self._room_waiters:
            self._room_changed()

    # --- consumption ------------------------------------------------------------------------
    async def _call_listener(self, m: MessageView) -> ConsumeResult:
        async with self._sem:
            try:
                if self._executor is None:
                    result = self.listener(m)
                    if inspect.isawaitable(result):
                        result = await result
                else:
                    loop = asyncio.get_running_loop()
                    result = await loop.run_in_executor(self._executor, self.listener, m)
            except Exception:
                log.exception("listener raised for message %s", m.message_id)
                return ConsumeResult.FAILURE
        return result if isinstance(result, ConsumeResult) else ConsumeResult.FAILURE

    async def _consume(self, m: MessageView) -> None:
        acking = False
        try:
            if m.corrupted:
                await self._forward_to_dlq(m)
                return
            result = await self._call_listener(m)
            if result is ConsumeResult.SUCCESS:
                self._ack_then_release(m)
                acking = True
            elif m.delivery_attempt >= self.backoff.max_attempts:
                await self._forward_to_dlq(m)
            else:
                await self._nack(m, self.backoff.delay(m.delivery_attempt))
        except MQClientError as e:
            log.warning("settling message %s failed: %s", m.message_id, e)
        finally:
            if not acking:
                self._release(m)
            self._inflight.discard(asyncio.current_task())  # type: ignore[arg-type]

    def _ack_retrying(self, m: MessageView, settled: Outcome, attempt: int = 1) -> None:
        """Ack ``m`` without a coroutine waiting for it (see mqcloud.ack_batching); a call lost on
        the way is tried again (:data:`ACK_ATTEMPTS` tries in all, 0.2 s then 0.4 s apart) unless the
        consumer is shutting down. ``settled`` gets the last try's outcome (None: acked)."""

        def answered(error: BaseException | None) -> None:
            lost = isinstance(error, (TransportError, InternalError))
            if lost and attempt < ACK_ATTEMPTS and not self._stopping:
                loop = asyncio.get_running_loop()
                loop.call_later(0.2 * attempt, self._ack_retrying, m, settled, attempt + 1)
            else:
                settled(error)

        self.ack_then(m, answered)

    def _ack_then_release(self, m: MessageView) -> None:
        """Ack ``m`` and release it from the cache once the broker answered (or it was given up on)."""

        def settled(error: BaseException | None) -> None:
            if isinstance(error, MQClientError):
                log.warning("settling message %s failed: %s", m.message_id, error)
            self._release(m)

        self._ack_retrying(m, settled)

    async def _consume_fifo(self, m: MessageView) -> None:
        try:
            attempt = m.delivery_attempt
            while True:
                result = ConsumeResult.FAILURE if m.corrupted else await self._call_listener(m)
                if result is ConsumeResult.SUCCESS:
                    await self._ack_with_retry(m)
                    return
                if attempt >= self.backoff.max_attempts or m.corrupted:
                    await self._forward_to_dlq(m)
                    return
                await asyncio.sleep(self.backoff.delay(attempt))
                attempt += 1
                m.delivery_attempt = attempt
        except MQClientError as e:
            log.warning("settling FIFO message %s failed: %s", m.message_id, e)
        finally:
            self._release(m)

    async def _ack_with_retry(self, m: MessageView) -> None:
        """:meth:`_ack_retrying`, waited for (a FIFO group's next message waits for this ack)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ack_retrying(m, lambda error: _settle(future, error is None, error))
        await future

    async def _nack(self, m: MessageView, delay: float) -> None:
        await self.change_invisible_duration(m, delay)

    async def _forward_to_dlq(self, m: MessageView) -> None:
        req = svc.ForwardMessageToDeadLetterQueueRequest(
            group=self._group(),
            topic=self.resource(m.topic),
            receipt_handle=m.receipt_handle,
            message_id=m.message_id,
            delivery_attempt=m.delivery_attempt,
            max_delivery_attempts=self.backoff.max_attempts,
        )
        resp = await self.rpc.unary(m.endpoint, "ForwardMessageToDeadLetterQueue", req)
        check_status(resp.status)

    async def shutdown(self, drain_timeout: float = 10.0) -> None:
        self._stopping = True
        for task in self._loops.values():
            task.cancel()
        await asyncio.gather(*self._loops.values(), return_exceptions=True)
        self._loops.clear()
        if self._inflight:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*self._inflight, return_exceptions=True), drain_timeout)
        await super().shutdown()
        self._receivers_closing.set()  # a receive thread still busy ends after its receive
        for receiver in self._receivers:
            receiver.close()
        self._receivers.clear()
        if self._direct is not None:  # ends the receives still parked (their calls are cancelled)
            self._direct.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


class PushConsumer(BlockingClient[AsyncPushConsumer]):
    _thread_name = "mqcloud-push-consumer"
    _shutdown_timeout = 30.0

    """Blocking flavour of :class:`AsyncPushConsumer`: ``start()`` returns once receiving has
    begun; the listener runs on a thread pool. Use as a context manager or call ``shutdown()``."""

    def __init__(
        self,
        config: ClientConfig,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str],
        listener: MessageListener,
        *,
        consumption_threads: int = 20,
        max_cache_message_count: int = 1024,
        max_cache_message_size_bytes: int = 64 * 1024 * 1024,
        invisible_duration: float = 30.0,
        receives_per_queue: int = 4,
    ) -> None:
        self._args = (config, group, subscriptions, listener)
        self._kwargs = {
            "consumption_threads": consumption_threads,
            "max_cache_message_count": max_cache_message_count,
            "max_cache_message_size_bytes": max_cache_message_size_bytes,
            "invisible_duration": invisible_duration,
            "receives_per_queue": receives_per_queue,
        }

    async def _create_core(self) -> AsyncPushConsumer:
        # created on the loop so its asyncio primitives bind to it
        return AsyncPushConsumer(*self._args, **self._kwargs)  # type: ignore[arg-type]
