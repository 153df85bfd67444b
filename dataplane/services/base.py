"""Shared plumbing of the RPC handlers: the error boundary, metrics and request context."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from dataplane.errors import BrokerError, status_of
from dataplane.metrics import RPC_LATENCY
from dataplane.names import namespace_from_metadata

__all__ = ("header_namespace", "unary")

logger = logging.getLogger(__name__)

Resp = TypeVar("Resp")


def header_namespace(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    return namespace_from_metadata(context.invocation_metadata())  # type: ignore[arg-type]


def unary(
    response_cls: Callable[..., Resp],
) -> Callable[[Callable[..., Awaitable[Resp]]], Callable[..., Awaitable[Resp]]]:
    """The one error boundary of unary v2 RPCs: BrokerError -> ``response(status=...)``."""

    def decorate(handler: Callable[..., Awaitable[Resp]]) -> Callable[..., Awaitable[Resp]]:
        method = handler.__name__
        latency = RPC_LATENCY.labels(method)  # the child once, not a labels() lookup per call
        clock = time.perf_counter

        @functools.wraps(handler)
        async def wrapper(self: Any, request: Any, context: Any) -> Resp:
            started = clock()
            try:
                self.broker.clients.touch(context.invocation_metadata(), context.peer())
                return await handler(self, request, context)
            except BrokerError as exc:
                return response_cls(status=status_of(exc))
            except Exception as exc:
                logger.exception("unexpected error in %s", method)
                return response_cls(status=status_of(exc))
            finally:
                latency.observe(clock() - started)

        return wrapper

    return decorate
