"""PullMessage, UpdateOffset, GetOffset, QueryOffset: offset-based access for pull consumers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from dataplane.broker import Broker
from dataplane.errors import BadRequest, BrokerError, IllegalOffset, ok_status, status_of
from dataplane.filters import compile_filter
from dataplane.names import resolve
from dataplane.replica_reads import far_behind_reader
from dataplane.services.consume import to_v2_message
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("get_offset", "pull_message", "query_offset", "update_offset")


def _queue(broker: Broker, mq: pb.MessageQueue, header_ns: str) -> tuple[str, str, int]:
    ns, topic = resolve(mq.topic, header_ns)
    config = broker.topic(topic)
    if not 0 <= mq.id < config.queue_count:
        raise BadRequest(f"queue id {mq.id} out of range 0..{config.queue_count - 1}")
    return ns, topic, mq.id


def update_offset(
    broker: Broker, request: svc.UpdateOffsetRequest, header_ns: str
) -> svc.UpdateOffsetResponse:
    _, group = resolve(request.group, header_ns, kind="group")
    broker.group(group)
    _, topic, qid = _queue(broker, request.message_queue, header_ns)
    low = broker.store.get_min_offset_in_queue(topic, qid)
    high = broker.store.get_max_offset_in_queue(topic, qid)
    if not low <= request.offset <= high:
        raise IllegalOffset(f"offset {request.offset} outside {low}..{high}")
    assert broker.pop is not None
    broker.pop.reset(group, topic, qid, request.offset)
    return svc.UpdateOffsetResponse(status=ok_status())


def get_offset(broker: Broker, request: svc.GetOffsetRequest, header_ns: str) -> svc.GetOffsetResponse:
    _, group = resolve(request.group, header_ns, kind="group")
    broker.group(group)
    _, topic, qid = _queue(broker, request.message_queue, header_ns)
    assert broker.pop is not None
    pos = broker.pop.peek(group, topic, qid)
    if pos is not None:
        return svc.GetOffsetResponse(status=ok_status(), offset=pos.committed())
    committed = broker.committed_offset(group, topic, qid)
    if committed < 0:
        return svc.GetOffsetResponse(
            status=pb.Status(code=pb.Code.OFFSET_NOT_FOUND, message="no committed offset")
        )
    return svc.GetOffsetResponse(status=ok_status(), offset=committed)


def query_offset(broker: Broker, request: svc.QueryOffsetRequest, header_ns: str) -> svc.QueryOffsetResponse:
    _, topic, qid = _queue(broker, request.message_queue, header_ns)
    policy = request.query_offset_policy
    if policy == pb.QueryOffsetPolicy.BEGINNING:
        offset = broker.store.get_min_offset_in_queue(topic, qid)
    elif policy == pb.QueryOffsetPolicy.END:
        offset = broker.store.get_max_offset_in_queue(topic, qid)
    elif policy == pb.QueryOffsetPolicy.TIMESTAMP:
        if not request.HasField("timestamp"):
            raise BadRequest("TIMESTAMP policy needs a timestamp")
        ms = request.timestamp.seconds * 1000 + request.timestamp.nanos // 1_000_000
        offset = broker.store.get_offset_in_queue_by_time(topic, qid, ms)
    else:
        raise BadRequest(f"unknown query offset policy {policy}")
    return svc.QueryOffsetResponse(status=ok_status(), offset=int(offset))


async def pull_message(
    broker: Broker, request: svc.PullMessageRequest, context: Any, header_ns: str
) -> AsyncIterator[svc.PullMessageResponse]:
    """Stream {status}, messages..., {next_offset}; long-polls when the queue has nothing new."""
    try:
        _, group = resolve(request.group, header_ns, kind="group")
        broker.group(group)
        ns, topic, qid = _queue(broker, request.message_queue, header_ns)
        flt = compile_filter(request.filter_expression if request.HasField("filter_expression") else None)
        if request.offset < 0:
            raise IllegalOffset("offset must be >= 0")
        batch = request.batch_size or 32
        if not 1 <= batch <= broker.settings.max_receive_batch:
            raise BadRequest(f"batch_size must be 1..{broker.settings.max_receive_batch}")
        poll_ms = (
            request.long_polling_timeout.seconds * 1000 + request.long_polling_timeout.nanos // 1_000_000
        )
        poll_ms = min(poll_ms, broker.settings.max_long_polling_ms)
        # The margin keeps the answer ahead of the client's deadline; it is not taken off the poll.
        remaining = context.time_remaining() if context is not None else None
        if remaining is not None:
            poll_ms = min(poll_ms, max(int(remaining * 1000) - broker.settings.long_polling_margin_ms, 0))
        deadline = time.monotonic() + poll_ms / 1000
        # A pull far behind reads its records from an in-sync replica (docs/ha.md).
        read = await far_behind_reader(broker, topic, qid, request.offset, batch, flt.tags)
        while True:
            parked = broker.waiter(topic)  # a pull waits on its own queue: every wake reaches it
            try:
                result = broker.store.get_messages(
                    topic,
                    qid,
                    request.offset,
                    max_count=batch,
                    tag_filter=set(flt.tags) if flt.tags is not None else None,
                    read=read,
                )
                if flt.sql is not None:  # the store filtered nothing; SQL is asked per message
                    matched = [m for m in result.messages if flt.accepts(m.properties)]
                    result = result._replace(messages=matched) if matched != result.messages else result
                progressed = result.next_begin_offset > request.offset  # filtered-out messages passed
                if result.messages or progressed or time.monotonic() >= deadline or broker.closing:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(parked.future, max(deadline - time.monotonic(), 0))
            finally:
                broker.drop_waiter(parked)
    except BrokerError as exc:
        yield svc.PullMessageResponse(status=status_of(exc))
        return
    if result.messages:
        yield svc.PullMessageResponse(status=ok_status())
    else:
        yield svc.PullMessageResponse(
            status=pb.Status(code=pb.Code.MESSAGE_NOT_FOUND, message="no new message")
        )
    echo = pb.Resource(resource_namespace=ns, name=request.message_queue.topic.name)
    store_host = broker.settings.advertise or broker.settings.listen
    for stored in result.messages:
        yield svc.PullMessageResponse(message=to_v2_message(stored, echo, store_host=store_host))
    yield svc.PullMessageResponse(next_offset=max(result.next_begin_offset, request.offset))
