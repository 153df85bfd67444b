"""gRPC servicers: ``MessagingServicer`` (apache.rocketmq.v2) and ``BrokerAdminServicer``.

Handlers are thin: resolve names, call one function of the sibling modules, return. Errors are
mapped to ``Status`` once, in ``services.base.unary`` (streams map them in their own generator).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from dataplane.broker import Broker
from dataplane.buffered_stream import Encoded
from dataplane.clients import CLIENT_ID_HEADER, header
from dataplane.errors import NotImplementedYet, ok_status
from dataplane.services import consume, offsets, produce, route, telemetry
from dataplane.services.admin import BrokerAdminServicer
from dataplane.services.base import call_metadata, header_namespace, unary
from dataplane.transaction.rpc import end_transaction
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc

__all__ = ("BUFFERED_STREAMS", "ENCODED_ANSWERS", "BrokerAdminServicer", "MessagingServicer")

# How the server registers MessagingServicer (dataplane.wire.add_servicer): the streams answered at
# once, after their long poll, in one write; the unary answers that may come already serialized.
BUFFERED_STREAMS = ("ReceiveMessage", "PullMessage")
ENCODED_ANSWERS = ("SendMessage",)


class MessagingServicer(service_pb2_grpc.MessagingServiceServicer):  # type: ignore[misc]
    """apache.rocketmq.v2.MessagingService over one :class:`Broker`."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @unary(svc.QueryRouteResponse)
    async def QueryRoute(self, request: svc.QueryRouteRequest, context: Any) -> svc.QueryRouteResponse:
        return route.query_route(self.broker, request, header_namespace(context))

    @unary(svc.HeartbeatResponse)
    async def Heartbeat(self, request: svc.HeartbeatRequest, context: Any) -> svc.HeartbeatResponse:
        client_id = header(call_metadata(context), CLIENT_ID_HEADER)
        route.heartbeat(self.broker, request, header_namespace(context), client_id)
        return svc.HeartbeatResponse(status=ok_status())

    @unary(svc.SendMessageResponse)
    async def SendMessage(
        self, request: svc.SendMessageRequest, context: Any
    ) -> svc.SendMessageResponse | produce.SentAnswer:
        return await produce.send_message(self.broker, request, header_namespace(context), context.peer())

    @unary(svc.QueryAssignmentResponse)
    async def QueryAssignment(
        self, request: svc.QueryAssignmentRequest, context: Any
    ) -> svc.QueryAssignmentResponse:
        return route.query_assignment(self.broker, request, header_namespace(context))

    def ReceiveMessage(
        self, request: svc.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[svc.ReceiveMessageResponse | Encoded]:
        # Returns the stream instead of re-yielding it: one async-generator step less per message
        # (dataplane.wire registers an async generator around it, as grpc.aio requires).
        self.broker.clients.touch(call_metadata(context), context.peer())
        return consume.receive_message(self.broker, request, context, header_namespace(context))

    @unary(svc.AckMessageResponse)
    async def AckMessage(self, request: svc.AckMessageRequest, context: Any) -> svc.AckMessageResponse:
        return consume.ack_message(self.broker, request, header_namespace(context))

    @unary(svc.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(
        self, request: svc.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> svc.ForwardMessageToDeadLetterQueueResponse:
        return await consume.forward_to_dlq(self.broker, request, header_namespace(context))

    async def PullMessage(
        self, request: svc.PullMessageRequest, context: Any
    ) -> AsyncIterator[svc.PullMessageResponse]:
        self.broker.clients.touch(call_metadata(context), context.peer())
        async for response in offsets.pull_message(self.broker, request, context, header_namespace(context)):
            yield response

    @unary(svc.UpdateOffsetResponse)
    async def UpdateOffset(self, request: svc.UpdateOffsetRequest, context: Any) -> svc.UpdateOffsetResponse:
        return offsets.update_offset(self.broker, request, header_namespace(context))

    @unary(svc.GetOffsetResponse)
    async def GetOffset(self, request: svc.GetOffsetRequest, context: Any) -> svc.GetOffsetResponse:
        return offsets.get_offset(self.broker, request, header_namespace(context))

    @unary(svc.QueryOffsetResponse)
    async def QueryOffset(self, request: svc.QueryOffsetRequest, context: Any) -> svc.QueryOffsetResponse:
        return offsets.query_offset(self.broker, request, header_namespace(context))

    @unary(svc.EndTransactionResponse)
    async def EndTransaction(
        self, request: svc.EndTransactionRequest, context: Any
    ) -> svc.EndTransactionResponse:
        return await end_transaction(self.broker, request, header_namespace(context))

    async def Telemetry(
        self, request_iterator: AsyncIterator[svc.TelemetryCommand], context: Any
    ) -> AsyncIterator[svc.TelemetryCommand]:
        async for command in telemetry.telemetry(self.broker, request_iterator, context):
            yield command

    @unary(svc.NotifyClientTerminationResponse)
    async def NotifyClientTermination(
        self, request: svc.NotifyClientTerminationRequest, context: Any
    ) -> svc.NotifyClientTerminationResponse:
        client_id = header(call_metadata(context), CLIENT_ID_HEADER)
        if client_id:
            self.broker.clients.forget(client_id)
            self.broker.release_renewals(client_id)  # its push-consumed messages come back soon
        return svc.NotifyClientTerminationResponse(status=ok_status())

    @unary(svc.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(
        self, request: svc.ChangeInvisibleDurationRequest, context: Any
    ) -> svc.ChangeInvisibleDurationResponse:
        return consume.change_invisible_duration(self.broker, request, header_namespace(context))

    @unary(svc.RecallMessageResponse)
    async def RecallMessage(
        self, request: svc.RecallMessageRequest, context: Any
    ) -> svc.RecallMessageResponse:
        return await produce.recall_message(self.broker, request, header_namespace(context))

    @unary(svc.SyncLiteSubscriptionResponse)
    async def SyncLiteSubscription(
        self, request: svc.SyncLiteSubscriptionRequest, context: Any
    ) -> svc.SyncLiteSubscriptionResponse:
        raise NotImplementedYet("lite topics are not supported")
