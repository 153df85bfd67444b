"""What simple and push consumers share: subscriptions, ReceiveMessage, Ack, ChangeInvisibleDuration."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mqcloud._base import BaseClient, duration
from mqcloud.ack_batching import MAX_ACK_ENTRIES, AckCoalescer, Outcome, check_ack
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.config import ClientConfig, endpoints_key
from mqcloud.errors import MQClientError, check_status
from mqcloud.message import FilterExpression, MessageView

if TYPE_CHECKING:
    from mqcloud._blocking_rpc import BlockingRpc

__all__ = ("ConsumerBase", "MessageViews", "ack_entry", "changed")

log = logging.getLogger("mqcloud.consumer")


def _filters(subs: Mapping[str, FilterExpression | str]) -> dict[str, FilterExpression]:
    return {t: f if isinstance(f, FilterExpression) else FilterExpression(f) for t, f in subs.items()}


class ConsumerBase(BaseClient):
    def __init__(
        self, config: ClientConfig, group: str, subscriptions: Mapping[str, FilterExpression | str]
    ) -> None:
        super().__init__(config)
        if not group:
            raise ValueError("consumer group is required")
        self.group = group
        self.subscriptions = _filters(subscriptions)
        self._acks: AckCoalescer | None = None  # made on the loop of the first ack
        self._topics: dict[str, pb.Resource] = {}  # of the topics acked at
        self._group_resource: pb.Resource | None = None

    def _initial_topics(self) -> list[str]:
        return list(self.subscriptions)

    def _group(self) -> pb.Resource:
        """The group's Resource, made once (requests copy it; nothing changes it in place)."""
        if self._group_resource is None:
            self._group_resource = self.resource(self.group)
        return self._group_resource

    def _subscription(self) -> pb.Subscription:
        return pb.Subscription(
            group=self._group(),
            subscriptions=[
                pb.SubscriptionEntry(topic=self.resource(t), expression=f.to_pb())
                for t, f in self.subscriptions.items()
            ],
        )

    def _receive_request(
        self,
        queue: pb.MessageQueue,
        filter_expression: FilterExpression,
        batch_size: int,
        invisible_duration: float,
        long_polling: float,
        *,
        auto_renew: bool = False,
        attempt_id: str | None = None,
    ) -> svc.ReceiveMessageRequest:
        """A ReceiveMessage request from ``queue``, long-polling ``long_polling`` seconds."""
        req = svc.ReceiveMessageRequest(
            group=self._group(),
            message_queue=queue,
            filter_expression=filter_expression.to_pb(),
            batch_size=batch_size,
            invisible_duration=duration(invisible_duration),
            auto_renew=auto_renew,
            long_polling_timeout=duration(long_polling),
        )
        if attempt_id is not None:
            req.attempt_id = attempt_id
        return req

    def _receive_deadline(self, req: svc.ReceiveMessageRequest) -> float:
        """The seconds a receive's whole stream may take: its long poll and the request timeout."""
        return self.config.request_timeout + req.long_polling_timeout.ToNanoseconds() / 1e9

    async def _receive(self, queue: pb.MessageQueue, req: svc.ReceiveMessageRequest) -> list[MessageView]:
        """The messages of one receive from ``queue`` (``req``: from :meth:`_receive_request`)."""
        views = MessageViews(queue)
        deadline = self._receive_deadline(req)
        async for resp in self.rpc.server_stream(views.endpoint, "ReceiveMessage", req, deadline):
            views.take(resp)
        return views.messages

    def _receive_blocking(
        self,
        rpc: BlockingRpc,
        queue: pb.MessageQueue,
        req: svc.ReceiveMessageRequest,
        on_call: Callable[[Any], None] | None = None,
    ) -> list[MessageView]:
        """:meth:`_receive` on gRPC's blocking API, on the calling thread (``on_call``: see
        :meth:`BlockingRpc.server_stream`)."""
        views = MessageViews(queue)
        deadline = self._receive_deadline(req)
        for resp in rpc.server_stream(views.endpoint, "ReceiveMessage", req, deadline, on_call):
            views.take(resp)
        return views.messages

    async def ack(self, message: MessageView) -> None:
        """Acknowledge: the message is consumed and will not be delivered to this group again.

        Acks made while another of the same broker and topic is unanswered go out together in one
        AckMessage call (``mqcloud.ack_batching``); each still fails or succeeds on its own."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.ack_then(message, future)
        await future

    def ack_then(self, message: MessageView, outcome: asyncio.Future[None] | Outcome) -> None:
        """:meth:`ack` without waiting: ``outcome`` gets its result (``AckCoalescer.ack_then``)."""
        if self._acks is None:
            self._acks = AckCoalescer(self._ack_call)
        topic = self._topics.get(message.topic)
        if topic is None:  # one Resource per topic, not one per ack
            topic = self._topics[message.topic] = self.resource(message.topic)
        self._acks.ack_then(message.endpoint, self._group(), topic, ack_entry(message), outcome)

    async def _ack_call(self, endpoint: str, request: svc.AckMessageRequest) -> Any:
        return await self.rpc.unary(endpoint, "AckMessage", request)

    def _ack_requests(self, messages: Sequence[MessageView]) -> list[AckBatch]:
        """One AckMessage request per broker and topic of ``messages`` (per MAX_ACK_ENTRIES of them)."""
        by_key: dict[tuple[str, str], list[int]] = {}
        for i, message in enumerate(messages):
            by_key.setdefault((message.endpoint, message.topic), []).append(i)
        batches = []
        for (endpoint, topic), indexes in by_key.items():
            for at in range(0, len(indexes), MAX_ACK_ENTRIES):
                chunk = indexes[at : at + MAX_ACK_ENTRIES]
                entries = [ack_entry(messages[i]) for i in chunk]
                request = svc.AckMessageRequest(
                    group=self._group(), topic=self.resource(topic), entries=entries
                )
                batches.append(AckBatch(endpoint, request, chunk))
        return batches

    async def ack_all(self, messages: Sequence[MessageView]) -> list[MQClientError | None]:
        """Acknowledge ``messages`` in one AckMessage call per broker and topic (of up to 256 each)
        rather than a call per message. Returns, in the order of ``messages``, None for each message
        acked and the error for each the broker refused (a stale receipt handle, say); a call that
        fails as a whole (the broker unreachable) raises its error."""
        outcomes: list[MQClientError | None] = [None] * len(messages)
        for batch in self._ack_requests(messages):
            batch.settle(await self.rpc.unary(batch.endpoint, "AckMessage", batch.request), outcomes)
        return outcomes

    async def shutdown(self) -> None:
        if self._acks is not None:  # acks under way are answered before the channels close
            await self._acks.close()
        await super().shutdown()

    def _change_invisible_request(
        self, message: MessageView, seconds: float
    ) -> svc.ChangeInvisibleDurationRequest:
        return svc.ChangeInvisibleDurationRequest(
            group=self._group(),
            topic=self.resource(message.topic),
            receipt_handle=message.receipt_handle,
            invisible_duration=duration(seconds),
            message_id=message.message_id,
        )

    async def change_invisible_duration(self, message: MessageView, seconds: float) -> None:
        """Make the message visible again after ``seconds`` (0 = soon); updates its receipt handle."""
        req = self._change_invisible_request(message, seconds)
        changed(message, await self.rpc.unary(message.endpoint, "ChangeInvisibleDuration", req))


class MessageViews:
    """The messages of one ReceiveMessage stream from ``queue``, taken response by response (its
    status checked); ``endpoint`` is the broker's, where they are acked."""

    def __init__(self, queue: pb.MessageQueue) -> None:
        self.endpoint = _ep(queue)
        self.messages: list[MessageView] = []

    def take(self, resp: svc.ReceiveMessageResponse) -> None:
        which = resp.WhichOneof("content")
        if which == "status":
            check_status(resp.status)
        elif which == "message":
            self.messages.append(MessageView.from_pb(resp.message, self.endpoint))


class AckBatch:
    """One AckMessage call of ``ack_all``: its endpoint, its request, and the indexes of its
    entries' messages in the caller's list."""

    __slots__ = ("endpoint", "indexes", "request")

    def __init__(self, endpoint: str, request: svc.AckMessageRequest, indexes: list[int]) -> None:
        self.endpoint, self.request, self.indexes = endpoint, request, indexes

    def settle(self, response: svc.AckMessageResponse, outcomes: list[MQClientError | None]) -> None:
        """Put each entry's outcome (:func:`check_ack`) at its message's index in ``outcomes``."""
        count = len(self.indexes)
        for n, i in enumerate(self.indexes):
            try:
                check_ack(response, n, count)
            except MQClientError as exc:
                outcomes[i] = exc


def ack_entry(message: MessageView) -> svc.AckMessageEntry:
    return svc.AckMessageEntry(message_id=message.message_id, receipt_handle=message.receipt_handle)


def changed(message: MessageView, resp: svc.ChangeInvisibleDurationResponse) -> None:
    """Check a ChangeInvisibleDuration answer and give ``message`` its new receipt handle."""
    check_status(resp.status)
    if resp.receipt_handle:
        message.receipt_handle = resp.receipt_handle


def _ep(queue: pb.MessageQueue) -> str:
    return endpoints_key(queue.broker.endpoints)
