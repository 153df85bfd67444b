"""dataplane.wire keeps the metadata grpc decoded to find a call's handler, so the guard does not
ask the call's context to decode it again: each call gets its own, and no other task gets any."""

from __future__ import annotations

import asyncio
from typing import Any

from dataplane.services.base import call_metadata, remember_metadata
from dataplane.wire import add_servicer, invocation_metadata
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.unit.dataplane.conftest import serving

HEARTBEAT = "/apache.rocketmq.v2.MessagingService/Heartbeat"


async def _in_another_task(context: Any) -> Any:
    return invocation_metadata(context)


class _Probe:
    """Heartbeat records what the call sees of its metadata: through dataplane.wire (twice), as the
    guard remembers it, as the context decodes it, and through dataplane.wire in a task it starts."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def Heartbeat(self, request: Any, context: Any) -> svc.HeartbeatResponse:
        first = invocation_metadata(context)
        await asyncio.sleep(0.01)  # calls overlap: each still sees its own
        self.seen.append(
            {
                "first": first,
                "again": invocation_metadata(context),
                "remembered": remember_metadata(context),
                "later": call_metadata(context),
                "decoded": context.invocation_metadata(),
                "decoded_again": context.invocation_metadata(),
                "other_task": await asyncio.create_task(_in_another_task(context)),
            }
        )
        return svc.HeartbeatResponse()

    def __getattr__(self, name: str) -> Any:
        async def method(request: Any, context: Any) -> Any:
            return svc.HeartbeatResponse()

        return method


async def _calls(metadata: list[tuple[tuple[str, str], ...]]) -> list[dict[str, Any]]:
    probe = _Probe()
    service = svc.DESCRIPTOR.services_by_name["MessagingService"]
    async with serving(lambda server: add_servicer(server, probe, service)) as channel:
        heartbeat = channel.unary_unary(HEARTBEAT)
        request = svc.HeartbeatRequest().SerializeToString()
        await asyncio.gather(*(heartbeat(request, metadata=m) for m in metadata))
    return probe.seen


def test_each_call_reuses_the_metadata_its_handler_was_found_with() -> None:
    metadata = [(("x-mq-namespace", f"ns-{i}"), ("x-mq-client-id", f"client-{i}")) for i in range(5)]
    seen = asyncio.run(_calls(metadata))
    assert len(seen) == 5
    namespaces = set()
    for call in seen:
        first = call["first"]
        # the context decodes a new tuple on each call; the lookup's tuple is one, kept
        assert call["decoded"] is not call["decoded_again"]
        assert call["again"] is first and call["remembered"] is first and call["later"] is first
        assert first == call["decoded"]  # the same entries the context decodes
        # a task the call starts does not take it: it asks the context, which decodes anew
        assert call["other_task"] is not first and call["other_task"] == first
        namespaces.add(dict(first)["x-mq-namespace"])
    assert namespaces == {f"ns-{i}" for i in range(5)}  # each call its own
