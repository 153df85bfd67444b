"""dataplane.wire keeps the metadata grpc decoded to find a call's handler, so the guard does not
ask the call's context to decode it again: each call gets its own, and no other task gets any."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from dataplane.services.base import call_metadata, remember_metadata
from dataplane.wire import add_servicer, looked_up_metadata
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

HEARTBEAT = "/apache.rocketmq.v2.MessagingService/Heartbeat"


async def _looked_up_elsewhere() -> Any:
    return looked_up_metadata()


class _Probe:
    """Heartbeat answers with what the call sees of its metadata: from the handler lookup, as the
    guard remembers it, as the context decodes it, and as a task the call starts sees it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def Heartbeat(self, request: Any, context: Any) -> svc.HeartbeatResponse:
        looked_up = looked_up_metadata()
        await asyncio.sleep(0.01)  # calls overlap: each still sees its own
        remembered = remember_metadata(context)
        other_task = await asyncio.create_task(_looked_up_elsewhere())
        self.seen.append(
            {
                "looked_up": looked_up,
                "remembered": remembered,
                "later": call_metadata(context),
                "decoded": context.invocation_metadata(),
                "other_task": other_task,
            }
        )
        return svc.HeartbeatResponse()

    def __getattr__(self, name: str) -> Any:
        async def method(request: Any, context: Any) -> Any:
            return svc.HeartbeatResponse()

        return method


async def _calls(metadata: list[tuple[tuple[str, str], ...]]) -> list[dict[str, Any]]:
    server = grpc.aio.server()
    probe = _Probe()
    add_servicer(server, probe, svc.DESCRIPTOR.services_by_name["MessagingService"])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            heartbeat = channel.unary_unary(HEARTBEAT)
            request = svc.HeartbeatRequest().SerializeToString()
            await asyncio.gather(*(heartbeat(request, metadata=m) for m in metadata))
    finally:
        await server.stop(None)
    return probe.seen


def test_each_call_reuses_the_metadata_its_handler_was_found_with() -> None:
    metadata = [(("x-mq-namespace", f"ns-{i}"), ("x-mq-client-id", f"client-{i}")) for i in range(5)]
    seen = asyncio.run(_calls(metadata))
    assert len(seen) == 5
    namespaces = set()
    for call in seen:
        looked_up = call["looked_up"]
        assert looked_up is not None  # registered through add_servicer: the lookup's tuple is kept
        assert looked_up == call["decoded"]  # the same entries the context decodes
        assert call["remembered"] is looked_up and call["later"] is looked_up
        assert call["other_task"] is None  # a task the call starts does not take it
        namespaces.add(dict(looked_up)["x-mq-namespace"])
    assert namespaces == {f"ns-{i}" for i in range(5)}  # each call its own


def test_outside_a_call_there_is_nothing_to_reuse() -> None:
    assert asyncio.run(_looked_up_elsewhere()) is None
