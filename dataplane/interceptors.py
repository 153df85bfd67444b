"""Guards around the RPCs: every v2 RPC passes the :class:`~dataplane.guard.Guard` (authentication,
namespace + ACL, quotas) and is metered (a method wrapper); every admin RPC (``/mqcloud.admin.v1.*``,
whatever service) needs the operator token (:meth:`AdminAuthInterceptor.refusal`, the ``gate`` the
server passes to ``dataplane.wire.add_servicer`` for each admin service: a grpc.aio server
interceptor would add a coroutine to every v2 call as well; ``intercept_service`` remains for servers
that register services otherwise).

v2 refusals are answered as the clients expect: a response carrying the v2 ``Status`` (gRPC OK), the
stream shapes kept (ReceiveMessage ends with a delivery timestamp; Telemetry replies a status
command). Admin refusals are gRPC errors (UNAUTHENTICATED), as for any admin failure.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

from dataplane.auth.resources import Touch, sent_topics, settings_resources, touched
from dataplane.buffered_stream import Encoded
from dataplane.errors import BrokerError, status_of
from dataplane.guard import Guard
from dataplane.names import namespace_from_metadata, qualify
from dataplane.services.base import remember_metadata
from dataplane.services.produce import send_summary
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("ADMIN_PREFIX", "V2_PREFIX", "AdminAuthInterceptor", "MessagingInterceptor")

V2_PREFIX = "/apache.rocketmq.v2.MessagingService/"
ADMIN_PREFIX = "/mqcloud.admin.v1."
_OK = 20000

Handler = Any  # grpc.RpcMethodHandler (a namedtuple; the stubs do not type it)


def _response_class(rpc: str) -> Any:
    return getattr(svc, f"{rpc}Response", None)


class MessagingInterceptor:
    """Wraps each v2 servicer method (through ``dataplane.wire.add_servicer``'s ``wrap`` hook).

    Not a grpc.aio ServerInterceptor: a method wrapper sees decoded requests (add_servicer decodes
    in the handler so malformed bytes get INVALID_ARGUMENT) and costs nothing per call to look up.
    """

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    def wrap(self, rpc: str, kind: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """The guarded form of servicer ``method`` for v2 RPC ``rpc`` of shape ``kind``."""
        if kind == "unary_unary":
            return self._unary(rpc, method)
        if kind == "unary_stream":
            return self._server_stream(rpc, method)
        if kind == "stream_stream" and rpc == "Telemetry":
            return self._telemetry(method)
        return method

    def _unary(self, rpc: str, inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        guard = self.guard
        response_cls = _response_class(rpc)
        sending = rpc == "SendMessage"
        clock = time.perf_counter

        async def behavior(request: Any, context: Any) -> Any:
            metadata = remember_metadata(context)
            produce = None
            sizes: dict[tuple[str, str], list[int]] = {}
            try:
                if sending:
                    produce, sizes, touches = _produce_totals(request, metadata)
                else:
                    touches = touched(rpc, request)
                guard.admit(rpc, touches, metadata, context.peer(), produce)
            except BrokerError as exc:
                return response_cls(status=status_of(exc))
            if not sending:
                return await inner(request, context)
            started = clock()
            response = await inner(request, context)
            if response.status.code == _OK:
                stored = sizes  # an OK answer stored every message (MULTIPLE_RESULTS otherwise)
            else:
                stored = {}
                header_ns = namespace_from_metadata(metadata)
                for message, entry in zip(request.messages, response.entries, strict=False):
                    if entry.status.code == _OK:
                        key = (message.topic.resource_namespace or header_ns, message.topic.name)
                        stored.setdefault(key, []).append(len(message.body))
            guard.count_sent(stored, clock() - started)
            durable = guard.metering_durable()
            if durable is not None:  # SYNC_FLUSH: the counts are on disk before the ack
                await durable
            return response

        return behavior

    def _server_stream(
        self, rpc: str, inner: Callable[..., AsyncIterator[Any]]
    ) -> Callable[..., AsyncIterator[Any]]:
        guard = self.guard
        response_cls = _response_class(rpc)
        receive = rpc == "ReceiveMessage"
        clock = time.perf_counter

        async def behavior(request: Any, context: Any) -> AsyncIterator[Any]:
            try:
                admission = guard.admit(
                    rpc, touched(rpc, request), remember_metadata(context), context.peer()
                )
                group, topic = request.group, request.message_queue.topic
                wanted = request.batch_size or 32
                allowed = guard.admit_consume(admission, group, topic, wanted)
                if allowed < wanted:
                    request.batch_size = allowed
            except BrokerError as exc:
                yield response_cls(status=status_of(exc))
                if receive:
                    now = timestamp_pb2.Timestamp()
                    now.GetCurrentTime()
                    yield response_cls(delivery_timestamp=now)
                return
            started = clock()
            sizes: list[int] = []
            batch: list[Any] = []  # the servicers yield a receive's messages back to back
            try:
                async for response in inner(request, context):
                    if type(response) is Encoded or response.WhichOneof("content") == "message":
                        batch.append(response)
                        continue
                    if batch:  # metered (one journal entry) before any of them is sent
                        sizes += guard.count_delivering(admission, topic, batch)
                        for message in batch:
                            yield message
                        batch = []
                    yield response
                if batch:
                    sizes += guard.count_delivering(admission, topic, batch)
                    for message in batch:
                        yield message
            finally:
                guard.count_delivered(admission, group, topic, sizes, clock() - started)

        return behavior

    def _telemetry(self, inner: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
        guard = self.guard

        async def behavior(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            metadata = context.invocation_metadata()
            peer = context.peer()
            try:
                admission = guard.admit("Telemetry", (), metadata, peer)
            except BrokerError as exc:
                yield svc.TelemetryCommand(status=status_of(exc))
                return
            refused: list[BrokerError] = []

            async def checked() -> AsyncIterator[Any]:
                async for command in requests:
                    if command.HasField("settings"):
                        try:
                            guard.auth.authorize(
                                admission.principal,
                                settings_resources(command.settings),
                                admission.header_ns,
                                peer,
                            )
                        except BrokerError as exc:
                            guard.metrics.refused(exc.code)
                            refused.append(exc)
                            return
                    yield command

            async for reply in inner(checked(), context):
                yield reply
            if refused:
                yield svc.TelemetryCommand(status=status_of(refused[0]))

        return behavior


def _produce_totals(
    request: Any, metadata: Any
) -> tuple[dict[tuple[str, str], tuple[int, int, int]], dict[tuple[str, str], list[int]], list[Touch]]:
    """Of a SendMessage: (namespace, qualified topic) -> (messages, body bytes, largest body) for
    admission, (namespace, topic) -> body sizes for metering, and what it touches for the access
    check (all read from the request's bytes)."""
    sizes, runs = send_summary(request, namespace_from_metadata(metadata))
    totals: dict[tuple[str, str], tuple[int, int, int]] = {}
    for (ns, name), per_topic in sizes.items():
        key = (ns, qualify(ns, name))
        count, total, largest = totals.get(key, (0, 0, 0))
        totals[key] = (count + len(per_topic), total + sum(per_topic), max(largest, *per_topic))
    return totals, sizes, sent_topics(runs)


class AdminAuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc,type-arg]
    """Operator credentials for every ``/mqcloud.admin.v1.`` method: ``authorization: Bearer TOKEN``.

    Without a configured token the admin API is open only in development mode.
    """

    def __init__(self, token: str | None, dev_mode: bool) -> None:
        self._token = token.encode() if token else None
        self._dev_mode = dev_mode

    def refusal(self, metadata: Any) -> str | None:
        """Why a call with ``metadata`` is refused, or None when it may proceed."""
        if self._token is None:
            return None if self._dev_mode else "the admin API is disabled: no admin token is configured"
        given = b""
        for key, value in metadata or ():
            if key == "authorization":
                text = value.decode(errors="replace") if isinstance(value, bytes) else value
                if text.startswith("Bearer "):
                    given = text[len("Bearer ") :].strip().encode()
        if not given:
            return "operator credentials required (authorization: Bearer <admin token>)"
        if not hmac.compare_digest(given, self._token):
            return "invalid operator credentials"
        return None

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Handler]], details: grpc.HandlerCallDetails
    ) -> Handler:
        method: str = details.method  # type: ignore[attr-defined]
        if not method.startswith(ADMIN_PREFIX):
            return await continuation(details)
        reason = self.refusal(details.invocation_metadata)  # type: ignore[attr-defined]
        handler = await continuation(details)
        if reason is None or handler is None:
            return handler
        return _refusing(handler, reason)


def _refusing(handler: Handler, reason: str) -> Handler:
    """``handler`` with every behaviour replaced by an UNAUTHENTICATED abort (same call shape)."""

    async def unary(request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)

    async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)
        yield None  # pragma: no cover - abort raises

    if handler.unary_unary is not None:
        return handler._replace(unary_unary=unary)
    if handler.unary_stream is not None:
        return handler._replace(unary_stream=streaming)
    if handler.stream_unary is not None:
        return handler._replace(stream_unary=unary)
    return handler._replace(stream_stream=streaming)
