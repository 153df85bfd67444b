"""A real grpc.aio server on loopback for the tests of dataplane.wire's registration."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import grpc


@contextlib.asynccontextmanager
async def serving(register: Callable[[grpc.aio.Server], None]) -> AsyncIterator[grpc.aio.Channel]:
    """A server with what ``register`` adds to it, and a channel to it; both closed on leaving."""
    server = grpc.aio.server()
    register(server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        await server.stop(None)
