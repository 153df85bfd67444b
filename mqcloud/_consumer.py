"""What simple and push consumers share: subscriptions, ReceiveMessage, Ack, ChangeInvisibleDuration."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mqcloud._base import BaseClient, duration
from mqcloud.ack_batching import AckCoalescer
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.config import ClientConfig, endpoints_key
from mqcloud.errors import check_status
from mqcloud.message import FilterExpression, MessageView

__all__ = ("ConsumerBase",)

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

    def _initial_topics(self) -> list[str]:
        return list(self.subscriptions)

    def _group(self) -> pb.Resource:
        return self.resource(self.group)

    def _subscription(self) -> pb.Subscription:
        return pb.Subscription(
            group=self._group(),
            subscriptions=[
                pb.SubscriptionEntry(topic=self.resource(t), expression=f.to_pb())
                for t, f in self.subscriptions.items()
            ],
        )

    async def _receive(
        self,
        queue: pb.MessageQueue,
        filter_expression: FilterExpression,
        batch_size: int,
        invisible_duration: float,
        long_polling: float,
        *,
        auto_renew: bool = False,
        attempt_id: str | None = None,
    ) -> list[MessageView]:
        endpoint = _ep(queue)
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
        out: list[MessageView] = []
        timeout = self.config.request_timeout + long_polling
        async for resp in self.rpc.server_stream(endpoint, "ReceiveMessage", req, timeout):
            which = resp.WhichOneof("content")
            if which == "status":
                check_status(resp.status)
            elif which == "message":
                out.append(MessageView.from_pb(resp.message, endpoint))
        return out

    async def ack(self, message: MessageView) -> None:
        """Acknowledge: the message is consumed and will not be delivered to this group again.

        Acks made while another of the same broker and topic is unanswered go out together in one
        AckMessage call (``mqcloud.ack_batching``); each still fails or succeeds on its own."""
        if self._acks is None:
            self._acks = AckCoalescer(self._ack_call)
        entry = svc.AckMessageEntry(message_id=message.message_id, receipt_handle=message.receipt_handle)
        await self._acks.ack(message.endpoint, self._group(), self.resource(message.topic), entry)

    async def _ack_call(self, endpoint: str, request: svc.AckMessageRequest) -> Any:
        return await self.rpc.unary(endpoint, "AckMessage", request)

    async def shutdown(self) -> None:
        if self._acks is not None:  # acks under way are answered before the channels close
            await self._acks.close()
        await super().shutdown()

    async def change_invisible_duration(self, message: MessageView, seconds: float) -> None:
        """Make the message visible again after ``seconds`` (0 = soon); updates its receipt handle."""
        req = svc.ChangeInvisibleDurationRequest(
            group=self._group(),
            topic=self.resource(message.topic),
            receipt_handle=message.receipt_handle,
            invisible_duration=duration(seconds),
            message_id=message.message_id,
        )
        resp = await self.rpc.unary(message.endpoint, "ChangeInvisibleDuration", req)
        check_status(resp.status)
        if resp.receipt_handle:
            message.receipt_handle = resp.receipt_handle


def _ep(queue: pb.MessageQueue) -> str:
    return endpoints_key(queue.broker.endpoints)
