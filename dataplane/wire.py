"""Register gRPC servicers so that undecodable requests get INVALID_ARGUMENT, not a crash.

The generated ``add_*Servicer_to_server`` functions hand protobuf's ``FromString`` to grpc as the
request deserializer; when it raises, grpc.aio logs a traceback and answers UNKNOWN. Here the
handlers receive the raw bytes and decode them themselves, so a malformed request is refused
with a one-line message. A valid request costs one extra Python call (a streaming response one
async-generator step per item). The services' generic handler also keeps the headers grpc decoded to
find each call's handler, for the guard (:func:`invocation_metadata`), so they are decoded once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Collection
from contextvars import ContextVar
from typing import Any

import grpc
from google.protobuf import descriptor as d
from google.protobuf import message_factory
from google.protobuf.message import DecodeError, Message

from dataplane.buffered_stream import serialize, write_buffered

__all__ = ("add_servicer", "invocation_metadata", "request_bytes")

logger = logging.getLogger(__name__)


def _refusal(cls: type[Message], exc: Exception) -> str:
    return f"malformed {cls.DESCRIPTOR.name}: {exc}"


def _decode(cls: type[Message], raw: bytes) -> Message | str:
    try:
        return cls.FromString(raw)
    except (DecodeError, RuntimeError, ValueError) as exc:  # upb raises DecodeError; be generous
        return _refusal(cls, exc)


# The request a unary call decoded and the bytes it came in, for code that reads a request's wire
# form (the compiled send path): each call runs in a task of its own, so this is the call's own.
_received: ContextVar[tuple[Message, bytes] | None] = ContextVar("received", default=None)


def request_bytes(request: Message) -> bytes:
    """``request`` in its wire form: the bytes this call decoded it from (callers do not change
    requests), or its serialization when it did not come in on this call."""
    received = _received.get()
    if received is not None and received[0] is request:
        return received[1]
    return request.SerializeToString()


# The invocation metadata grpc decoded to find a call's handler (``HandlerCallDetails``), kept with
# the call's task: asking the call's context for it decodes every key and value again, 7-13 us per
# call with ten headers here, on every RPC. grpc.aio looks the handler up in the task that then runs
# it (one task per call); the task is kept beside the metadata and compared, so a value is never
# used by another call's task, whatever a grpc version does.
_looked_up: ContextVar[tuple[object, Any] | None] = ContextVar("looked_up", default=None)


def invocation_metadata(context: Any) -> Any:
    """The invocation metadata of the call running in this task: the tuple grpc decoded to find its
    handler, else (none kept, or a grpc that hands an empty one) ``context.invocation_metadata()``."""
    looked = _looked_up.get()
    if looked is not None and looked[0] is asyncio.current_task() and looked[1]:
        return looked[1]
    return context.invocation_metadata()


class _ServiceHandlers(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    """The method handlers of one service by full method name (grpc's own generic handler does the
    same lookup), keeping the metadata of each call it finds a handler for."""

    def __init__(self, service: str, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]) -> None:
        self._handlers = {f"/{service}/{name}": handler for name, handler in handlers.items()}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = self._handlers.get(handler_call_details.method)
        if handler is not None:
            try:
                task = asyncio.current_task()
            except RuntimeError:  # no running loop: not a grpc.aio server
                return handler
            _looked_up.set((task, handler_call_details.invocation_metadata))
        return handler


def _unary_unary(method: Callable[..., Any], cls: type[Message]) -> Callable[..., Any]:
    async def behavior(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        request = _decode(cls, raw)
        if isinstance(request, str):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request)
        _received.set((request, raw))
        return await method(request, context)

    return behavior


def _unary_stream(method: Callable[..., Any], cls: type[Message], buffered: bool) -> Callable[..., Any]:
    # grpc.aio tells streaming handlers by inspect.isasyncgenfunction: an async generator's items
    # are written by grpc.aio, a coroutine writes them itself (write_buffered: all in one go)
    async def behavior(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        request = _decode(cls, raw)
        if isinstance(request, str):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request)
        async for response in method(request, context):
            yield response

    async def writing(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        request = _decode(cls, raw)
        if isinstance(request, str):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request)
        await write_buffered(context, method(request, context))

    return writing if buffered else behavior


def _stream_in(method: Callable[..., Any], cls: type[Message], streaming_out: bool) -> Callable[..., Any]:
    async def decoded(
        requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Message]:
        async for raw in requests:
            request = _decode(cls, raw)
            if isinstance(request, str):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request)
            assert not isinstance(request, str)
            yield request

    async def behavior(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async for response in method(decoded(requests, context), context):
            yield response

    async def unary_behavior(
        requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        return await method(decoded(requests, context), context)

    return behavior if streaming_out else unary_behavior


Wrap = Callable[[str, str, Callable[..., Any]], Callable[..., Any]]
Gate = Callable[[Any], "str | None"]  # invocation metadata -> why the call is refused, or None


def _gated(behavior: Callable[..., Any], gate: Gate, streaming_out: bool) -> Callable[..., Any]:
    """``behavior`` refusing calls with UNAUTHENTICATED when ``gate`` objects, before any decoding."""

    async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        reason = gate(invocation_metadata(context))
        if reason is not None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)
        return await behavior(request, context)

    async def streaming(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        reason = gate(invocation_metadata(context))
        if reason is not None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)
        async for response in behavior(request, context):
            yield response

    # a buffered stream's behavior writes its responses itself and returns None, as a unary returns
    return streaming if streaming_out and inspect.isasyncgenfunction(behavior) else unary


_HANDLER_FACTORIES: dict[tuple[bool, bool], Callable[..., Any]] = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def _kind(m: d.MethodDescriptor) -> str:
    return f"{'stream' if m.client_streaming else 'unary'}_{'stream' if m.server_streaming else 'unary'}"


def add_servicer(
    server: grpc.aio.Server,
    servicer: object,
    service: d.ServiceDescriptor,
    wrap: Wrap | None = None,
    gate: Gate | None = None,
    buffered: Collection[str] = (),
    encoded: Collection[str] = (),
) -> None:
    """Register every method of ``service`` implemented by ``servicer`` on ``server``.

    ``wrap(rpc_name, kind, method)`` may return a replacement for a servicer method (kind is
    ``unary_unary``, ``unary_stream``, ``stream_unary`` or ``stream_stream``); it sees decoded
    requests, as the servicer does. ``gate(metadata)`` (the admin token check) refuses a call with
    UNAUTHENTICATED before its request is decoded. The server-streaming methods named in ``buffered``
    produce their whole stream at once; their responses go out in one write
    (:func:`dataplane.buffered_stream.write_buffered`). The unary methods named in ``encoded`` may answer
    with a response already serialized (:class:`~dataplane.buffered_stream.Encoded`). Per-service hooks
    instead of a grpc.aio server interceptor: an interceptor runs (as an extra coroutine) on every call
    of every service.
    """
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for m in service.methods:
        method = getattr(servicer, m.name)
        if wrap is not None:
            method = wrap(m.name, _kind(m), method)
        req_cls = message_factory.GetMessageClass(m.input_type)
        resp_cls = message_factory.GetMessageClass(m.output_type)
        if m.client_streaming:
            behavior = _stream_in(method, req_cls, m.server_streaming)
        elif m.server_streaming:
            behavior = _unary_stream(method, req_cls, m.name in buffered)
        else:
            behavior = _unary_unary(method, req_cls)
        if gate is not None:
            behavior = _gated(behavior, gate, m.server_streaming)
        # a buffered stream or an encoded answer may come already serialized (buffered_stream.Encoded)
        serializer = serialize if m.name in buffered or m.name in encoded else resp_cls.SerializeToString
        handler = _HANDLER_FACTORIES[(m.client_streaming, m.server_streaming)](
            behavior, response_serializer=serializer
        )
        handlers[m.name] = handler
    # Generic handlers only. Registering the methods too (add_registered_method_handlers) saves a dict
    # lookup per call, but grpc.aio's accept loop then waits on one pending request per registered
    # method, and asyncio.wait over all of them (about 50 here) on every call costs far more.
    server.add_generic_rpc_handlers((_ServiceHandlers(service.full_name, handlers),))
