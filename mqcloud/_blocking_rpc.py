"""Calls of the blocking clients made on the caller's own thread, with gRPC's blocking API.

The blocking clients run their asyncio core on a private loop thread, and a call handed to that
loop costs two thread hand-overs and grpc.aio's completion polling on top of the call itself: a
``Producer.send`` of one message made there spent half again as much CPU as one made here
(docs/benchmarks.md, "The blocking clients' calls on the caller's thread"). The hot calls (sends,
receives, acks, invisible-time changes) therefore go out here, on channels of their own; routes,
Telemetry, heartbeats and everything else stay on the loop. ``SingleThreadedUnaryStream`` reads a
receive's responses on the thread that made the call, not through gRPC's polling thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import grpc.experimental

from mqcloud._rpc import CHANNEL_OPTIONS, transport_error
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc
from mqcloud.config import ClientConfig
from mqcloud.errors import ClientClosedError
from mqcloud.signing import build_metadata

__all__ = ("BlockingRpc",)


class BlockingRpc:
    """One blocking channel per broker endpoint; safe to call from any number of threads."""

    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        self.client_id = client_id
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, service_pb2_grpc.MessagingServiceStub] = {}
        self._closed = False

    def stub(self, endpoint: str) -> service_pb2_grpc.MessagingServiceStub:
        stub = self._stubs.get(endpoint)
        if stub is not None:
            return stub
        with self._lock:
            stub = self._stubs.get(endpoint)
            if stub is None:
                if self._closed:
                    raise ClientClosedError("client was shut down")
                options = [*CHANNEL_OPTIONS, (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]
                if self.config.tls:
                    channel = grpc.secure_channel(endpoint, grpc.ssl_channel_credentials(), options)
                else:
                    channel = grpc.insecure_channel(endpoint, options)
                self._channels[endpoint] = channel
                stub = self._stubs[endpoint] = service_pb2_grpc.MessagingServiceStub(channel)
        return stub

    def unary(self, endpoint: str, method: str, request: Any, deadline: float | None = None) -> Any:
        """Call a unary RPC; returns the response message (its ``status`` is checked by the caller)."""
        md = build_metadata(self.config, self.client_id)
        fn = getattr(self.stub(endpoint), method)
        try:
            return fn(request, metadata=md, timeout=deadline or self.config.request_timeout)
        except grpc.RpcError as e:
            raise transport_error(method, endpoint, e, md) from e

    def server_stream(
        self,
        endpoint: str,
        method: str,
        request: Any,
        deadline: float,
        on_call: Callable[[Any], None] | None = None,
    ) -> Iterator[Any]:
        """Iterate a server-streaming RPC; ``deadline`` is seconds for the whole stream. ``on_call``
        gets the call as soon as it is made (another thread may cancel it: the iteration then ends
        with a CANCELLED TransportError)."""
        md = build_metadata(self.config, self.client_id)
        call = getattr(self.stub(endpoint), method)(request, metadata=md, timeout=deadline)
        if on_call is not None:
            on_call(call)
        try:
            yield from call
        except grpc.RpcError as e:
            raise transport_error(method, endpoint, e, md) from e
        finally:
            call.cancel()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        for channel in channels:
            channel.close()
