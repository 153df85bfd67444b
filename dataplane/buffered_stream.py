"""Server-streaming responses sent together: one socket write for a whole ReceiveMessage.

grpc.aio sends every streamed response as its own batch, and the HTTP/2 transport writes each one
out at once: a ReceiveMessage of 32 messages cost 34 ``sendmsg`` calls, and on the broker's loop
thread those writes were the largest single cost of consuming (docs/benchmarks.md, "Consume: one
write per receive"). gRPC has a flag for this, the write-buffer hint (``GRPC_WRITE_BUFFER_HINT``):
the transport keeps a hinted message until a write without the hint or the trailing status, up to
its write buffer (64 KiB; past that it writes as it goes, so nothing waits on a full buffer).

grpc.aio's ``ServicerContext.write`` takes no flags. :func:`write_buffered` therefore sends the
first response through ``context.write`` (it carries the response headers) and the others through
``_send_message``, the function of grpc's Cython layer that ``context.write`` itself calls, on the
call's ``RPCState``, with the hint. The trailing status then flushes the lot. Both names are
private to grpcio: :data:`AVAILABLE` says whether this grpcio has them; without them every
response goes through ``context.write`` (the same bytes, one write each).

Only for streams produced at once, with no waiting between responses (ReceiveMessage and
PullMessage answer after their long poll): a hinted response waits for the end of the stream.

A stream may carry responses already serialized (:class:`Encoded`: the receive path writes its
messages with a compiled encoder); they go out as they are. :func:`serialize` is the response
serializer such a method is registered with, for the responses that go through ``context.write``.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
from collections.abc import AsyncIterator
from typing import Any

from google.protobuf.message import Message

__all__ = ("AVAILABLE", "Encoded", "serialize", "write_buffered")

_cygrpc: Any = importlib.import_module("grpc._cython.cygrpc")  # grpcio's C layer (untyped)
_send_message: Any = getattr(_cygrpc, "_send_message", None)
_RPC_STATE: Any = getattr(_cygrpc, "RPCState", None)
_HINT: int | None = getattr(getattr(_cygrpc, "WriteFlag", None), "buffer_hint", None)

#: Whether this grpcio lets :func:`write_buffered` hint its writes.
AVAILABLE: bool = _send_message is not None and _RPC_STATE is not None and _HINT is not None


class Encoded:
    """A response in its wire form (``data``, the serialized protobuf), with the size of the message
    body it carries (``body_size``: metering counts bodies without parsing the response again)."""

    __slots__ = ("body_size", "data")

    def __init__(self, data: bytes, body_size: int) -> None:
        self.data, self.body_size = data, body_size


def serialize(response: Message | Encoded) -> bytes:
    """The response serializer of methods whose responses may come as :class:`Encoded` (buffered
    streams, and unary answers registered among ``encoded``: ``dataplane.wire.add_servicer``)."""
    return response.data if isinstance(response, Encoded) else response.SerializeToString()


def _rpc_state(context: Any) -> Any:
    """The ``RPCState`` of a grpc.aio servicer context (a C-level field, so found by reference)."""
    for ref in gc.get_referents(context):
        if isinstance(ref, _RPC_STATE):
            return ref
    return None


async def write_buffered(context: Any, responses: AsyncIterator[Message | Encoded]) -> None:
    """Send every response of ``responses`` on ``context``'s call; the transport writes them together."""
    state = _rpc_state(context) if AVAILABLE else None
    loop = asyncio.get_running_loop()
    headers_sent = False
    async for response in responses:
        if state is None or not headers_sent:
            await context.write(response)
            headers_sent = True
        else:
            await _send_message(state, serialize(response), None, _HINT, loop)
