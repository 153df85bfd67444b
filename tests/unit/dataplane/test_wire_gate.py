"""dataplane.wire's ``gate``: the admin token check of every admin service without a server
interceptor (which would also run on every v2 call)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from dataplane.interceptors import AdminAuthInterceptor
from dataplane.wire import add_servicer
from mqcloud.admin.v1 import admin_pb2 as a
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.unit.dataplane.conftest import serving

LIST_TOPICS = "/mqcloud.admin.v1.BrokerAdmin/ListTopics"
HEARTBEAT = "/apache.rocketmq.v2.MessagingService/Heartbeat"


class _Admin:
    def __getattr__(self, name: str) -> Any:
        async def method(request: Any, context: Any) -> Any:
            return a.ListTopicsResponse(topics=[a.Topic(name="t")])

        return method


class _Messaging:
    def __getattr__(self, name: str) -> Any:
        async def method(request: Any, context: Any) -> Any:
            return svc.HeartbeatResponse()

        return method


async def _calls() -> dict[str, Any]:
    gate = AdminAuthInterceptor("op-token", dev_mode=False).refusal

    def register(server: grpc.aio.Server) -> None:
        add_servicer(server, _Admin(), a.DESCRIPTOR.services_by_name["BrokerAdmin"], gate=gate)
        add_servicer(server, _Messaging(), svc.DESCRIPTOR.services_by_name["MessagingService"])

    out: dict[str, Any] = {}
    async with serving(register) as channel:
        list_topics = channel.unary_unary(LIST_TOPICS)
        for name, metadata, body in (
            ("anonymous", (), a.ListTopicsRequest().SerializeToString()),
            ("wrong", (("authorization", "Bearer nope"),), b""),
            ("anonymous_malformed", (), b"\xff\xff\xff"),  # refused before decoding
            ("operator", (("authorization", "Bearer op-token"),), b""),
            ("operator_malformed", (("authorization", "Bearer op-token"),), b"\xff\xff\xff"),
        ):
            try:
                out[name] = a.ListTopicsResponse.FromString(await list_topics(body, metadata=metadata))
            except grpc.aio.AioRpcError as exc:
                out[name] = exc.code()
        heartbeat = channel.unary_unary(HEARTBEAT)
        out["v2"] = await heartbeat(svc.HeartbeatRequest().SerializeToString())
    return out


def test_admin_services_need_the_token_and_v2_does_not() -> None:
    out = asyncio.run(_calls())
    assert out["anonymous"] == grpc.StatusCode.UNAUTHENTICATED
    assert out["wrong"] == grpc.StatusCode.UNAUTHENTICATED
    assert out["anonymous_malformed"] == grpc.StatusCode.UNAUTHENTICATED
    assert [t.name for t in out["operator"].topics] == ["t"]
    assert out["operator_malformed"] == grpc.StatusCode.INVALID_ARGUMENT
    assert out["v2"] == b""  # no token needed (v2 calls are guarded by MessagingInterceptor)
