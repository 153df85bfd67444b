"""Simple consumers: the application pulls with :meth:`receive`, then acks or changes the invisible
duration of each message itself. :class:`AsyncSimpleConsumer` for asyncio, :class:`SimpleConsumer`
blocking."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from mqcloud._consumer import ConsumerBase
from mqcloud._loop import BlockingClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.config import ClientConfig
from mqcloud.errors import ForbiddenError, IllegalStateError
from mqcloud.message import FilterExpression, MessageView

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

    async def receive(self, max_messages: int = 16, invisible_duration: float = 15.0) -> list[MessageView]:
        """Long-poll for up to ``max_messages``; each stays invisible to others for
        ``invisible_duration`` seconds unless acked. Returns ``[]`` when nothing arrived."""
        if not self.subscriptions:
            raise IllegalStateError("no subscriptions")
        topics = list(self.subscriptions)
        topic = topics[next(self._topic_rr) % len(topics)]
        route = await self._route(topic)
        queues = route.readable()
        if not queues:
            raise ForbiddenError(f"topic {topic} has no readable queue", 40300)
        queue = queues[next(self._queue_rr) % len(queues)]
        return await self._receive(
            queue, self.subscriptions[topic], max_messages, invisible_duration, self.await_duration
        )


class SimpleConsumer(BlockingClient[AsyncSimpleConsumer]):
    _thread_name = "mqcloud-simple-consumer"

    """Blocking flavour of :class:`AsyncSimpleConsumer` (runs it on a private event-loop thread)."""

    def __init__(
        self,
        config: ClientConfig,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str],
        *,
        await_duration: float = 20.0,
    ) -> None:
        self._core = AsyncSimpleConsumer(config, group, subscriptions, await_duration=await_duration)

    def receive(self, max_messages: int = 16, invisible_duration: float = 15.0) -> list[MessageView]:
        return self._lt().run(self.core.receive(max_messages, invisible_duration))

    def ack(self, message: MessageView) -> None:
        self._lt().run(self.core.ack(message))

    def change_invisible_duration(self, message: MessageView, seconds: float) -> None:
        self._lt().run(self.core.change_invisible_duration(message, seconds))

    def subscribe(self, topic: str, filter_expression: FilterExpression | str = "*") -> None:
        self.core.subscribe(topic, filter_expression)

    def unsubscribe(self, topic: str) -> None:
        self.core.unsubscribe(topic)
