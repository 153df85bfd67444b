"""Simple consumers: the application pulls with :meth:`receive`, then acks or changes the invisible
duration of each message itself. :class:`AsyncSimpleConsumer` for asyncio, :class:`SimpleConsumer`
blocking."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from mqcloud._consumer import ConsumerBase, changed
from mqcloud._loop import BlockingClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.config import ClientConfig
from mqcloud.errors import ForbiddenError, IllegalStateError, MQClientError
from mqcloud.message import FilterExpression, MessageView
from mqcloud.route import TopicRoute

__all__ = ("AsyncSimpleConsumer", "SimpleConsumer")


class AsyncSimpleConsumer(ConsumerBase):
    """``await_duration`` is the long-polling time of a receive (seconds)."""

    client_type = pb.ClientType.SIMPLE_CONSUMER

    def __init__(
        self,
        config: ClientConfig,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str],
        *,
        await_duration: float = 20.0,
    ) -> None:
        super().__init__(config, group, subscriptions)
        self.await_duration = await_duration
        self._topic_rr = itertools.count()
        self._queue_rr = itertools.count()

    def _settings(self) -> pb.Settings:
        s = self._base_settings()
        sub = self._subscription()
        sub.long_polling_timeout.FromNanoseconds(int(self.await_duration * 1e9))
        s.subscription.CopyFrom(sub)
        return s

    def subscribe(self, topic: str, filter_expression: FilterExpression | str = "*") -> None:
        self.subscriptions[topic] = (
            filter_expression
            if isinstance(filter_expression, FilterExpression)
            else FilterExpression(filter_expression)
        )

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)

    def _next_topic(self) -> str:
        """The topic the next receive asks (the subscriptions in turn)."""
        if not self.subscriptions:
            raise IllegalStateError("no subscriptions")
        topics = list(self.subscriptions)
        return topics[next(self._topic_rr) % len(topics)]

    def _next_queue(self, topic: str, route: TopicRoute) -> pb.MessageQueue:
        """The queue the next receive of ``topic`` asks (its readable queues in turn)."""
        queues = route.readable()
        if not queues:
            raise ForbiddenError(f"topic {topic} has no readable queue", 40300)
        return queues[next(self._queue_rr) % len(queues)]

    def _request_for(
        self, topic: str, queue: pb.MessageQueue, max_messages: int, invisible_duration: float
    ) -> svc.ReceiveMessageRequest:
        """A receive's request from ``queue`` with ``topic``'s filter and this consumer's long poll."""
        return self._receive_request(
            queue, self.subscriptions[topic], max_messages, invisible_duration, self.await_duration
        )

    async def receive(self, max_messages: int = 16, invisible_duration: float = 15.0) -> list[MessageView]:
        """Long-poll for up to ``max_messages``; each stays invisible to others for
        ``invisible_duration`` seconds unless acked. Returns ``[]`` when nothing arrived."""
        topic = self._next_topic()
        queue = self._next_queue(topic, await self._route(topic))
        return await self._receive(queue, self._request_for(topic, queue, max_messages, invisible_duration))


class SimpleConsumer(BlockingClient[AsyncSimpleConsumer]):
    """Blocking flavour of :class:`AsyncSimpleConsumer`: its receives, acks and invisible-time
    changes are calls on the caller's thread; routes, Telemetry and heartbeats run on a private
    event-loop thread. Thread-safe."""

    _thread_name = "mqcloud-simple-consumer"

    def __init__(
        self,
        config: ClientConfig,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str],
        *,
        await_duration: float = 20.0,
    ) -> None:
        self._core = AsyncSimpleConsumer(config, group, subscriptions, await_duration=await_duration)

    # receive, ack and change_invisible_duration are made on the caller's thread, on gRPC's blocking
    # API (mqcloud._blocking_rpc); only a route not cached yet is asked for on the loop.

    def receive(self, max_messages: int = 16, invisible_duration: float = 15.0) -> list[MessageView]:
        """Long-poll for up to ``max_messages`` (see :meth:`AsyncSimpleConsumer.receive`)."""
        calls, core = self._direct(), self.core
        topic = core._next_topic()
        route = core.routes.peek(topic) or self._lt().run(core._route(topic))
        queue = core._next_queue(topic, route)
        req = core._request_for(topic, queue, max_messages, invisible_duration)
        return core._receive_blocking(calls, queue, req)

    def ack(self, message: MessageView) -> None:
        """Acknowledge one message in a call of its own (the asyncio flavour coalesces concurrent acks;
        :meth:`ack_all` acks many in one call)."""
        (refused,) = self.ack_all([message])
        if refused is not None:
            raise refused

    def ack_all(self, messages: Sequence[MessageView]) -> list[MQClientError | None]:
        """Acknowledge ``messages`` in one call per broker and topic (see
        :meth:`AsyncSimpleConsumer.ack_all`): None for each acked, the error for each refused."""
        calls, core = self._direct(), self.core
        outcomes: list[MQClientError | None] = [None] * len(messages)
        for batch in core._ack_requests(messages):
            batch.settle(calls.unary(batch.endpoint, "AckMessage", batch.request), outcomes)
        return outcomes

    def change_invisible_duration(self, message: MessageView, seconds: float) -> None:
        calls, core = self._direct(), self.core
        req = core._change_invisible_request(message, seconds)
        changed(message, calls.unary(message.endpoint, "ChangeInvisibleDuration", req))

    def subscribe(self, topic: str, filter_expression: FilterExpression | str = "*") -> None:
        self.core.subscribe(topic, filter_expression)

    def unsubscribe(self, topic: str) -> None:
        self.core.unsubscribe(topic)
