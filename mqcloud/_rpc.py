"""gRPC plumbing: one ``grpc.aio`` channel per broker endpoint, signed metadata, deadlines, and the
translation of gRPC failures into :class:`~mqcloud.errors.TransportError`."""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio

from mqcloud.apache.rocketmq.v2 import service_pb2_grpc
from mqcloud.config import ClientConfig
from mqcloud.errors import TransportError
from mqcloud.signing import build_metadata

__all__ = ("CHANNEL_OPTIONS", "RpcClient", "new_client_id", "transport_error")

_client_index = itertools.count()
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(n: int) -> str:
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = _BASE36[r] + out
        if n == 0:
            return out


def new_client_id() -> str:
    """``host@pid@index@base36(time_ns)``, as the official Python client builds it."""
    return f"{socket.gethostname()}@{os.getpid()}@{next(_client_index)}@{_base36(time.time_ns())}"


#: The options of every channel the SDK opens to a broker.
CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
]


def transport_error(
    method: str, endpoint: str, error: grpc.RpcError, md: list[tuple[str, str]]
) -> TransportError:
    """A failed call (``error`` is also a ``grpc.Call``: its code and details) as the SDK reports it."""
    call: Any = error
    request_id = dict(md)["x-mq-request-id"]
    return TransportError(f"{method} to {endpoint}: {call.details()}", call.code().name, request_id)


class RpcClient:
    """Channels and stubs for the endpoints one client talks to. Must be used on one event loop."""

    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        self.client_id = client_id
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, service_pb2_grpc.MessagingServiceStub] = {}

    def metadata(self) -> list[tuple[str, str]]:
        return build_metadata(self.config, self.client_id)

    def stub(self, endpoint: str) -> service_pb2_grpc.MessagingServiceStub:
        stub = self._stubs.get(endpoint)
        if stub is None:
            options = CHANNEL_OPTIONS
            if self.config.tls:
                channel = grpc.aio.secure_channel(endpoint, grpc.ssl_channel_credentials(), options)
            else:
                channel = grpc.aio.insecure_channel(endpoint, options)
            self._channels[endpoint] = channel
            stub = self._stubs[endpoint] = service_pb2_grpc.MessagingServiceStub(channel)
        return stub

    async def unary(self, endpoint: str, method: str, request: Any, deadline: float | None = None) -> Any:
        """Call a unary RPC; returns the response message (its ``status`` is checked by the caller)."""
        md = self.metadata()
        fn = getattr(self.stub(endpoint), method)
        try:
            return await fn(request, metadata=md, timeout=deadline or self.config.request_timeout)
        except grpc.aio.AioRpcError as e:
            raise transport_error(method, endpoint, e, md) from e

    async def server_stream(
        self, endpoint: str, method: str, request: Any, deadline: float
    ) -> AsyncIterator[Any]:
        """Iterate a server-streaming RPC; ``deadline`` is seconds for the whole stream."""
        md = self.metadata()
        call = getattr(self.stub(endpoint), method)(request, metadata=md, timeout=deadline)
        try:
            async for item in call:
                yield item
        except grpc.aio.AioRpcError as e:
            raise transport_error(method, endpoint, e, md) from e
        finally:
            call.cancel()

    def telemetry(self, endpoint: str) -> Any:
        """Open the bidirectional Telemetry stream (a ``grpc.aio.StreamStreamCall``)."""
        return self.stub(endpoint).Telemetry(metadata=self.metadata())

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        await asyncio.gather(*(c.close(grace=None) for c in channels), return_exceptions=True)
