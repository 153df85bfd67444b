"""Streamed responses written together (dataplane/buffered_stream.py), over a real grpc.aio call.

The handler below pauses between two responses, which the broker's streams never do: that pause
makes buffering visible. With the write-buffer hint the second response waits in the transport
and reaches the client together with the last one; without it, it arrives at once. Arrivals are
compared with one another (a held response arrives with the last one, a sent one a pause before
it), not with the call's start, which a loaded machine delays.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import wrappers_pb2

from dataplane import buffered_stream
from dataplane.buffered_stream import Encoded, serialize, write_buffered

PAUSE_S = 0.5


async def _responses(
    count_before_pause: int, size: int, pause_s: float
) -> AsyncIterator[wrappers_pb2.StringValue]:
    for i in range(count_before_pause):
        yield wrappers_pb2.StringValue(value=f"r{i}".ljust(size))
    await asyncio.sleep(pause_s)
    yield wrappers_pb2.StringValue(value="last")


async def _handler(request: bytes, context: Any) -> None:
    count, size, pause_s = request.decode().split(",")
    await write_buffered(context, _responses(int(count), int(size), float(pause_s)))


async def _call(handler: Any, request: bytes, serializer: Any) -> list[tuple[str, float]]:
    """(value, seconds after the call started) of each response of one call to ``handler``."""
    server = grpc.aio.server()
    method = grpc.unary_stream_rpc_method_handler(handler, response_serializer=serializer)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Stream", {"Run": method}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_stream(
                "/t.Stream/Run",
                request_serializer=lambda raw: raw,
                response_deserializer=wrappers_pb2.StringValue.FromString,
            )
            started = time.monotonic()
            return [
                (response.value.rstrip(), time.monotonic() - started)
                async for response in call(request, timeout=10)
            ]
    finally:
        await server.stop(None)


async def _arrivals(before_pause: int, size: int = 2, pause_s: float = PAUSE_S) -> list[tuple[str, float]]:
    request = f"{before_pause},{size},{pause_s}".encode()
    return await _call(_handler, request, wrappers_pb2.StringValue.SerializeToString)


def test_this_grpcio_has_the_hint() -> None:
    # An upgrade of grpcio that renames the private parts must fail here, not slow consumers quietly.
    assert buffered_stream.AVAILABLE


async def test_hinted_responses_wait_for_the_end_of_the_stream() -> None:
    arrivals = await _arrivals(3)
    assert [value for value, _ in arrivals] == ["r0", "r1", "r2", "last"]
    # timed from the first arrival: on a loaded machine the call's start is no reference
    first, *rest = [at for _, at in arrivals]
    assert rest[-1] - first >= PAUSE_S * 0.9  # the first response goes out with the headers
    assert all(rest[-1] - at < PAUSE_S / 2 for at in rest), arrivals  # the others were held until the end


async def test_without_the_hint_each_response_is_sent_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buffered_stream, "AVAILABLE", False)
    arrivals = await _arrivals(3)
    assert [value for value, _ in arrivals] == ["r0", "r1", "r2", "last"]
    last = arrivals[3][1]
    assert all(last - at >= PAUSE_S / 2 for _, at in arrivals[:3]), arrivals  # none waited for the end


async def test_a_large_stream_is_not_held_back_by_the_write_buffer() -> None:
    # Past the transport's write buffer (64 KiB) hinted writes go out as they come: a stream larger
    # than the buffer completes (a hinted write waiting on a full buffer would hang here).
    # Timed against the last response, not the call's start (a loaded machine delays the connection
    # and the first responses by more than a pause): one held for the end arrives with the last.
    pause_s = 2.0
    arrivals = await _arrivals(400, size=1024, pause_s=pause_s)  # 400 KiB before the pause
    assert [value for value, _ in arrivals] == [f"r{i}" for i in range(400)] + ["last"]
    held_for = arrivals[-1][1] - arrivals[200][1]
    assert held_for > pause_s / 2, arrivals[200]  # sent before the pause, not held for it


async def _mixed(request: bytes, context: Any) -> None:
    async def responses() -> AsyncIterator[wrappers_pb2.StringValue | Encoded]:
        yield Encoded(wrappers_pb2.StringValue(value="first, encoded").SerializeToString(), 0)
        yield wrappers_pb2.StringValue(value="protobuf")
        yield Encoded(wrappers_pb2.StringValue(value="encoded").SerializeToString(), 0)

    await write_buffered(context, responses())


@pytest.mark.parametrize("hinted", [True, False])
async def test_encoded_responses_go_out_as_they_are(hinted: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Encoded responses (the receive path's compiled messages) mixed with protobuf ones, through the
    # hinted writes and through context.write with the serializer the broker registers (serialize)
    monkeypatch.setattr(buffered_stream, "AVAILABLE", hinted)
    values = [value for value, _ in await _call(_mixed, b"", serialize)]
    assert values == ["first, encoded", "protobuf", "encoded"]
