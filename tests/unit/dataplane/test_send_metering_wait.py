"""SYNC_FLUSH: a SendMessage is answered only once its metering journal entries are fsynced.

The interceptor waits on what ``Guard.metering_durable`` returns (a future while entries are not
fsynced, None when there is nothing to wait for). The guard here is a stand-in with that method and
the two others the interceptor calls; the guard's own side is tested with a real Guard below.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from dataplane.broker import Broker
from dataplane.config import BrokerSettings
from dataplane.guard import Guard
from dataplane.interceptors import MessagingInterceptor
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc


class _Guard:
    def __init__(self, durable: asyncio.Future[None] | None) -> None:
        self.durable = durable
        self.counted: list[dict[tuple[str, str], list[int]]] = []

    def admit(self, rpc: str, touches: Any, metadata: Any, peer: str, produce: Any = None) -> None:
        return None

    def count_sent(self, stored: dict[tuple[str, str], list[int]], seconds: float) -> None:
        self.counted.append(stored)

    def metering_durable(self) -> asyncio.Future[None] | None:
        return self.durable


class _Context:
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


def _request() -> svc.SendMessageRequest:
    message = pb.Message(topic=pb.Resource(resource_namespace="acme", name="orders"), body=b"x" * 10)
    message.system_properties.message_id = "01"
    return svc.SendMessageRequest(messages=[message])


async def _stored(request: Any, context: Any) -> svc.SendMessageResponse:
    return svc.SendMessageResponse(status=pb.Status(code=pb.Code.OK, message="OK"))


async def test_an_ok_send_is_answered_once_its_metering_is_durable() -> None:
    durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    guard = _Guard(durable)
    behavior = MessagingInterceptor(guard).wrap("SendMessage", "unary_unary", _stored)  # type: ignore[arg-type]
    call = asyncio.ensure_future(behavior(_request(), _Context()))
    await asyncio.sleep(0.05)
    assert guard.counted == [{("acme", "orders"): [10]}]  # counted, then waiting for the fsync
    assert not call.done()
    durable.set_result(None)
    answer = await asyncio.wait_for(call, 1)
    assert answer.status.code == pb.Code.OK


async def test_with_nothing_to_wait_for_the_send_is_answered_at_once() -> None:
    behavior = MessagingInterceptor(_Guard(None)).wrap("SendMessage", "unary_unary", _stored)  # type: ignore[arg-type]
    answer = await asyncio.wait_for(behavior(_request(), _Context()), 1)
    assert answer.status.code == pb.Code.OK


async def test_the_guard_has_a_future_only_under_sync_flush_with_entries_not_fsynced(tmp_path: Path) -> None:
    for flush in ("async", "sync"):
        settings = BrokerSettings(data_dir=tmp_path / flush, listen="127.0.0.1:0", flush=flush)
        guard = Guard(Broker(settings))
        assert guard.metering_durable() is None  # nothing appended yet
        guard.meter.count_in("acme", [10])
        durable = guard.metering_durable()
        if flush == "async":
            assert durable is None
            continue
        assert durable is not None
        await asyncio.wait_for(durable, 5)  # the group sync fsyncs the journal
        assert guard.meter.journal.synced == guard.meter.journal.total
        assert guard.metering_durable() is None
