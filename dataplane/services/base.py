"""Shared plumbing of the RPC handlers: the error boundary, metrics and request context."""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import grpc

from dataplane.errors import BrokerError, status_of
from dataplane.metrics import RPC_LATENCY
from dataplane.names import namespace_from_metadata
from dataplane.wire import invocation_metadata

__all__ = ("call_metadata", "header_namespace", "remember_metadata", "unary")

logger = logging.getLogger(__name__)

Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


# grpc.aio builds a new tuple (decoding every key and value) on each invocation_metadata() call,
# ~5-8 us with the headers the SDKs send; the guard, the error boundary and the handlers each need
# it. The interceptor remembers it for the call (the call's task context); ``context`` is compared
# so a value inherited by another call's task is never used.
_CALL_METADATA: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar(
    "mq_call_metadata", default=None
)


def remember_metadata(context: Any) -> Any:
    """``context.invocation_metadata()``, kept for :func:`call_metadata` during this call (the tuple
    grpc decoded to find the call's handler when there is one: ``dataplane.wire``)."""
    metadata = invocation_metadata(context)
    _CALL_METADATA.set((context, metadata))
    return metadata


def call_metadata(context: Any) -> Any:
    """The call's invocation metadata (remembered by the interceptor, else asked of grpc)."""
    cached = _CALL_METADATA.get()
    if cached is not None and cached[0] is context:
        return cached[1]
    return invocation_metadata(context)


def header_namespace(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    return namespace_from_metadata(call_metadata(context))


def unary(response_cls: Callable[..., Any]) -> Callable[[Handler], Handler]:
    """The one error boundary of unary v2 RPCs: BrokerError -> ``response_cls(status=...)``."""

    def decorate(handler: Handler) -> Handler:
        method = handler.__name__
        latency = RPC_LATENCY.labels(method)  # the child once, not a labels() lookup per call
        clock = time.perf_counter

        @functools.wraps(handler)
        async def wrapper(self: Any, request: Any, context: Any) -> Any:
            started = clock()
            try:
                self.broker.clients.touch(call_metadata(context), context.peer())
                return await handler(self, request, context)
            except BrokerError as exc:
                return response_cls(status=status_of(exc))
            except Exception as exc:
                logger.exception("unexpected error in %s", method)
                return response_cls(status=status_of(exc))
            finally:
                latency.observe(clock() - started)

        return cast(Handler, wrapper)

    return decorate
