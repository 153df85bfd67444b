"""SYNC_FLUSH: a SendMessage is answered only once its metering journal entries are fsynced.

The interceptor (``MessagingInterceptor``) runs over a real :class:`~dataplane.guard.Guard` and its
real metering journal; only the journal's fsync is held back (it waits for the test), so the send's
answer can be seen waiting for it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataplane.broker import Broker
from dataplane.config import BrokerSettings
from dataplane.guard import Guard
from dataplane.interceptors import MessagingInterceptor
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc


class _Context:
    """What the interceptor asks of a gRPC call's context."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


@pytest.fixture
def guards(tmp_path: Path) -> Iterator[dict[str, Guard]]:
    """A Guard per flush policy ("async", "sync"), development mode (anonymous callers admitted)."""
    made = {
        flush: Guard(
            Broker(
                BrokerSettings(data_dir=tmp_path / flush, listen="127.0.0.1:0", flush=flush, dev_mode=True)
            )
        )
        for flush in ("async", "sync")
    }
    yield made
    for guard in made.values():
        guard.meter.close()


def _request() -> svc.SendMessageRequest:
    message = pb.Message(topic=pb.Resource(resource_namespace="acme", name="orders"), body=b"x" * 10)
    message.system_properties.message_id = "01"
    return svc.SendMessageRequest(messages=[message])


async def _stored(request: svc.SendMessageRequest, context: object) -> svc.SendMessageResponse:
    return svc.SendMessageResponse(status=pb.Status(code=pb.Code.OK, message="OK"))


async def test_a_sync_flush_send_is_answered_once_its_metering_is_fsynced(guards: dict[str, Guard]) -> None:
    guard = guards["sync"]
    journal = guard.meter.journal
    release = threading.Event()
    fsync = journal.sync

    def held_sync() -> None:
        release.wait(5)
        fsync()

    journal.sync = held_sync  # type: ignore[method-assign]
    behavior = MessagingInterceptor(guard).wrap("SendMessage", "unary_unary", _stored)
    call = asyncio.ensure_future(behavior(_request(), _Context()))
    try:
        await asyncio.sleep(0.1)
        assert journal.total > journal.synced  # the send was counted (its call and its message) ...
        assert not call.done()  # ... and its answer waits for the fsync
    finally:
        release.set()
    answer = await asyncio.wait_for(call, 5)
    assert answer.status.code == pb.Code.OK
    assert journal.synced == journal.total


async def test_an_async_flush_send_is_answered_without_waiting(guards: dict[str, Guard]) -> None:
    guard = guards["async"]
    behavior = MessagingInterceptor(guard).wrap("SendMessage", "unary_unary", _stored)
    answer = await asyncio.wait_for(behavior(_request(), _Context()), 1)
    assert answer.status.code == pb.Code.OK
    assert guard.meter.journal.total > guard.meter.journal.synced  # counted, not waited for
    assert guard.metering_durable() is None


async def test_the_guard_has_nothing_to_wait_for_once_the_journal_is_fsynced(
    guards: dict[str, Guard],
) -> None:
    guard = guards["sync"]
    assert guard.metering_durable() is None  # nothing appended yet
    guard.meter.count_in("acme", [10])
    durable = guard.metering_durable()
    assert durable is not None
    await asyncio.wait_for(durable, 5)  # the group sync fsyncs the journal
    assert guard.meter.journal.synced == guard.meter.journal.total
    assert guard.metering_durable() is None
