"""dataplane.wire.request_bytes: a unary call's request in the bytes it came in, for the compiled
send path, and never another call's bytes."""

from __future__ import annotations

import asyncio
from typing import Any

from dataplane.wire import add_servicer, request_bytes
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.unit.dataplane.conftest import serving

SEND = "/apache.rocketmq.v2.MessagingService/SendMessage"


class _Echo:
    """SendMessage answers with the request's wire form (as message_id of one entry), the other
    methods with a stand-in response."""

    def __init__(self) -> None:
        self.other = svc.SendMessageRequest(messages=[pb.Message(body=b"not from the wire")])

    async def SendMessage(self, request: Any, context: Any) -> svc.SendMessageResponse:
        await asyncio.sleep(0.01)  # calls overlap: each still sees its own bytes
        return svc.SendMessageResponse(
            entries=[
                svc.SendResultEntry(message_id=request_bytes(request).hex()),
                svc.SendResultEntry(message_id=request_bytes(self.other).hex()),
            ]
        )

    def __getattr__(self, name: str) -> Any:
        async def method(request: Any, context: Any) -> Any:
            return svc.HeartbeatResponse()

        return method


async def _round_trips(bodies: list[bytes]) -> list[svc.SendMessageResponse]:
    service = svc.DESCRIPTOR.services_by_name["MessagingService"]
    async with serving(lambda server: add_servicer(server, _Echo(), service)) as channel:
        send = channel.unary_unary(SEND)
        answers = await asyncio.gather(*(send(body) for body in bodies))
    return [svc.SendMessageResponse.FromString(a) for a in answers]


def test_each_call_reads_the_bytes_it_came_in() -> None:
    # the same request encoded three ways (field order, an unknown field): each call gets its own
    request = svc.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="t"), body=b"x")])
    canonical = request.SerializeToString()
    body_first = pb.Message(body=b"x").SerializeToString()
    body_first += pb.Message(topic=pb.Resource(name="t")).SerializeToString()
    reordered = b"\x0a" + bytes([len(body_first)]) + body_first
    unknown = canonical + b"\xa0\x06\x01"  # field 100, varint 1: kept by the bytes, not by the message
    bodies = [canonical, reordered, unknown]
    answers = asyncio.run(_round_trips(bodies))
    other = _Echo().other.SerializeToString().hex()
    for body, answer in zip(bodies, answers, strict=True):
        assert svc.SendMessageRequest.FromString(body).messages == request.messages
        assert answer.entries[0].message_id == body.hex()
        assert answer.entries[1].message_id == other  # a request of its own: serialized
