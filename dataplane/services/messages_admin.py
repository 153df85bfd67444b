"""mqcloud.admin.v1.MessageAdmin: look at messages and their trace, move a group's offsets, list and
re-drive dead letters (proto/mqcloud/admin/v1/messages.proto, docs/broker.md "Message admin")."""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import grpc

from dataplane.broker import Broker
from dataplane.names import dlq_topic, split
from dataplane.services import consume as c
from dataplane.services import produce as p
from dataplane.timer.service import P_DELIVER_MS, P_TIMER_OUT_MS
from mqcloud.admin.v1 import messages_pb2 as m
from mqcloud.admin.v1 import messages_pb2_grpc
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("MessageAdminServicer", "RedriveLog", "message_view")

logger = logging.getLogger(__name__)

_DEFAULT_LIMIT = 32
_MAX_LIMIT = 256
_MAX_REDRIVE_SCAN = 10_000  # DLQ messages one redrive call looks at
_DLQ_PROPS = (p.P_DLQ_TOPIC, c.P_DLQ_QUEUE, c.P_DLQ_OFFSET, c.P_DLQ_ATTEMPTS)


class AdminRejected(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid(message: str) -> AdminRejected:
    return AdminRejected(grpc.StatusCode.INVALID_ARGUMENT, message)


def _guard(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """AdminRejected -> gRPC status (this service's one error boundary)."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await handler(self, request, context)
        except AdminRejected as exc:
            await context.abort(exc.code, exc.message)

    return wrapper


def _limit(value: int) -> int:
    if value < 0 or value > _MAX_LIMIT:
        raise _invalid(f"limit must be 1..{_MAX_LIMIT}")
    return value or _DEFAULT_LIMIT


def message_view(stored: Any, topic: str | None = None) -> m.MessageView:
    """A stored record as the admin views show it (user and system properties apart)."""
    props = stored.properties
    user = {k: v for k, v in props.items() if k not in p.SYSTEM_PROPERTY_KEYS and not k.startswith("__")}
    system = {k: v for k, v in props.items() if k not in user}
    deliver = props.get(P_DELIVER_MS) or props.get(P_TIMER_OUT_MS) or "0"
    return m.MessageView(
        message_id=props.get(p.P_UNIQ) or stored.msg_id,
        offset_message_id=stored.msg_id,
        topic=topic or props.get("REAL_TOPIC") or stored.topic,
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
        tag=props.get(p.P_TAGS, ""),
        keys=stored.keys,
        message_group=props.get(p.P_GROUP, ""),
        born_time_ms=stored.born_timestamp,
        store_time_ms=stored.store_timestamp,
        delivery_time_ms=int(deliver) if deliver.isdigit() else 0,
        body=stored.body,
        body_size=len(stored.body),
        properties=user,
        system_properties=system,
    )


class RedriveLog:
    """Which dead letters were re-driven: ``{dlq topic: [dlq offsets]}`` in ``dlq/redriven.json``.

    Atomic rewrite on change; offsets below the DLQ's min offset (gone with retention) are pruned.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._done: dict[str, set[int]] = {}
        if path.exists():
            self._done = {k: set(v) for k, v in json.loads(path.read_text()).items()}

    def contains(self, dlq: str, offset: int) -> bool:
        return offset in self._done.get(dlq, ())

    def add(self, dlq: str, offsets: Iterable[int], min_offset: int) -> None:
        done = self._done.setdefault(dlq, set())
        done.update(offsets)
        self._done[dlq] = {o for o in done if o >= min_offset}
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({k: sorted(v) for k, v in self._done.items()}, f)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self._path)


class MessageAdminServicer(messages_pb2_grpc.MessageAdminServicer):  # type: ignore[misc]
    """Thin handlers over the store, the POP state and the tracer of one :class:`Broker`."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.redriven = RedriveLog(broker.settings.data_dir / "dlq" / "redriven.json")

    def _store(self) -> Any:
        store = self.broker.store
        if not hasattr(store, "query_messages_by_key"):
            raise AdminRejected(grpc.StatusCode.FAILED_PRECONDITION, "needs the commitlog store engine")
        return store

    def _queue_count(self, topic: str) -> int:
        config = self.broker.metadata.get_topic(topic)
        if config is None:
            raise AdminRejected(grpc.StatusCode.NOT_FOUND, f"topic {topic!r} not found")
        return config.queue_count

    def _group(self, group: str) -> Any:
        config = self.broker.metadata.get_group(group)
        if config is None:
            raise AdminRejected(grpc.StatusCode.NOT_FOUND, f"group {group!r} not found")
        return config

    # Messages

    @_guard
    async def QueryMessages(self, request: m.QueryMessagesRequest, context: Any) -> m.QueryMessagesResponse:
        topic = request.topic
        count = self._queue_count(topic)
        store = self._store()
        limit = _limit(request.limit)
        by = request.WhichOneof("by")
        if by == "message_id":
            if not request.message_id or len(request.message_id) > 128:
                raise _invalid("message_id must be 1..128 characters")
            found = store.query_messages_by_uniq_key(request.message_id, limit)
            if not found:
                one = store.look_message_by_id(request.message_id)
                found = [one] if one is not None else []
            mine = [x for x in found if x.topic == topic]
            # not delivered yet: a pending delay or an unresolved half message of this topic
            found = mine or [x for x in found if x.properties.get("REAL_TOPIC") == topic]
        elif by == "key":
            if not request.key or " " in request.key or len(request.key) > 128:
                raise _invalid("key must be 1..128 characters without spaces")
            begin, end = _range(request.range) if request.HasField("range") else (0, 1 << 62)
            found = store.query_messages_by_key(topic, request.key, limit, begin, end)
        elif by == "time_range":
            begin, end = _range(request.time_range)
            found = []
            for qid in range(count):
                start = store.get_offset_in_queue_by_time(topic, qid, begin)
                result = store.get_messages(topic, qid, start, max_count=limit)
                found += [x for x in result.messages if x.store_timestamp <= end]
            found.sort(key=lambda x: (x.store_timestamp, x.queue_id, x.queue_offset))
        elif by == "queue":
            qid, offset = request.queue.queue_id, request.queue.offset
            if not 0 <= qid < count:
                raise _invalid(f"queue_id must be 0..{count - 1}")
            if offset < 0:
                raise _invalid("offset must be >= 0")
            found = store.get_messages(topic, qid, offset, max_count=limit).messages
        else:
            raise _invalid("give one of message_id, key, time_range or queue")
        return m.QueryMessagesResponse(messages=[message_view(x, topic) for x in found[:limit]])

    @_guard
    async def SendTestMessage(
        self, request: m.SendTestMessageRequest, context: Any
    ) -> m.SendTestMessageResponse:
        self._queue_count(request.topic)
        ns, name = split(request.topic)
        sp = pb.SystemProperties(
            message_id=_new_message_id(),
            body_encoding=pb.Encoding.IDENTITY,
            born_host="mqcloud-admin",
            queue_id=request.queue_id if request.queue_id >= 0 else -1,
        )
        sp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
        if request.tag:
            sp.tag = request.tag
        sp.keys.extend(request.keys)
        if request.message_group:
            sp.message_group = request.message_group
            sp.message_type = pb.MessageType.FIFO
        elif request.delivery_time_ms > 0:
            max_delay = self.broker.settings.max_delay_ms
            if request.delivery_time_ms - int(time.time() * 1000) > max_delay:  # checked before a
                # Timestamp is built from it: past year 9999 that raises, and the call ended UNKNOWN
                raise _invalid(f"delivery_time_ms is more than {max_delay} ms ahead")
            sp.delivery_timestamp.FromMilliseconds(request.delivery_time_ms)
            sp.message_type = pb.MessageType.DELAY
        else:
            sp.message_type = pb.MessageType.NORMAL
        if request.message_group and request.queue_id < 0:
            sp.queue_id = _fifo_queue(request.message_group, self._queue_count(request.topic))
        message = pb.Message(
            topic=pb.Resource(resource_namespace=ns, name=name),
            user_properties=dict(request.properties),
            system_properties=sp,
            body=request.body,
        )
        answer = await p.send_message(
            self.broker, svc.SendMessageRequest(messages=[message]), ns, "ipv4:127.0.0.1:0"
        )
        response = p.as_response(answer)
        entry = response.entries[0] if response.entries else None
        status = entry.status if entry is not None else response.status
        if status.code != pb.Code.OK:
            code = (
                grpc.StatusCode.UNAVAILABLE
                if status.code in (pb.Code.MASTER_PERSISTENCE_TIMEOUT, pb.Code.INTERNAL_ERROR)
                else grpc.StatusCode.INVALID_ARGUMENT
            )
            raise AdminRejected(code, f"{pb.Code.Name(status.code)}: {status.message}")
        assert entry is not None
        return m.SendTestMessageResponse(
            message_id=entry.message_id, queue_id=_queue_of(self.broker, entry), queue_offset=entry.offset
        )

    @_guard
    async def GetMessageTrace(
        self, request: m.GetMessageTraceRequest, context: Any
    ) -> m.GetMessageTraceResponse:
        if not request.message_id or len(request.message_id) > 128:
            raise _invalid("message_id must be 1..128 characters")
        limit = request.limit or 256
        if not 1 <= limit <= 1024:
            raise _invalid("limit must be 1..1024")
        events = self.broker.tracer.events(request.message_id, request.topic or None, limit)
        return m.GetMessageTraceResponse(
            message_id=request.message_id,
            events=[
                m.TraceEvent(
                    event=e.event,
                    time_ms=e.time_ms,
                    group=e.group,
                    attempt=e.attempt,
                    client_id=e.client_id,
                    detail=e.detail,
                )
                for e in events
            ],
        )

    # Offsets

    @_guard
    async def ResetOffset(self, request: m.ResetOffsetRequest, context: Any) -> m.ResetOffsetResponse:
        self._group(request.group)
        count = self._queue_count(request.topic)
        store = self.broker.store
        pop = self.broker.pop
        assert pop is not None
        target = request.to
        if target == m.RESET_TARGET_TIME and request.time_ms <= 0:
            raise _invalid("time_ms is required to reset to a time")
        if target not in (m.RESET_TARGET_BEGINNING, m.RESET_TARGET_END, m.RESET_TARGET_TIME):
            raise _invalid("to must be BEGINNING, END or TIME")
        # the group itself, and each member of a broadcast group ("group@client")
        members = {request.group} | {
            g for (g, t, _), _ in pop.items() if t == request.topic and c.base_group(g) == request.group
        }
        out = m.ResetOffsetResponse()
        with pop.batch():
            for qid in range(count):
                if target == m.RESET_TARGET_BEGINNING:
                    offset = store.get_min_offset_in_queue(request.topic, qid)
                elif target == m.RESET_TARGET_END:
                    offset = store.get_max_offset_in_queue(request.topic, qid)
                else:
                    offset = store.get_offset_in_queue_by_time(request.topic, qid, request.time_ms)
                for member in sorted(members):
                    pop.reset(member, request.topic, qid, int(offset))
                store.consumer_offsets.commit(request.group, request.topic, qid, int(offset))
                out.queues.append(m.QueuePoint(queue_id=qid, offset=int(offset)))
        self.broker.wake_all(request.topic)  # long polls look again from the new place at once
        logger.info(
            "offsets of %s on %s reset (%s)", request.group, request.topic, m.ResetTarget.Name(target)
        )
        return out

    # Dead letters

    def _dead_letters(self, group: str, limit: int, include_redriven: bool) -> list[Any]:
        store = self._store()
        dlq = dlq_topic(group)
        offset = store.get_min_offset_in_queue(dlq, 0)
        end = store.get_max_offset_in_queue(dlq, 0)
        found: list[Any] = []
        scanned = 0
        while offset < end and len(found) < limit and scanned < _MAX_REDRIVE_SCAN:
            result = store.get_messages(dlq, 0, offset, max_count=64)
            if not result.messages:
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
                continue
            for x in result.messages:
                scanned += 1
                if include_redriven or not self.redriven.contains(dlq, x.queue_offset):
                    found.append(x)
            offset = result.next_begin_offset
        return found[:limit]

    @_guard
    async def ListDeadLetters(
        self, request: m.ListDeadLettersRequest, context: Any
    ) -> m.ListDeadLettersResponse:
        self._group(request.group)
        found = self._dead_letters(request.group, _limit(request.limit), request.include_redriven)
        views = []
        for x in found:
            view = message_view(x, x.properties.get(p.P_DLQ_TOPIC) or x.topic)
            view.system_properties["__MQ_DLQ_OFFSET"] = str(x.queue_offset)
            views.append(view)
        return m.ListDeadLettersResponse(messages=views)

    @_guard
    async def RedriveDeadLetters(
        self, request: m.RedriveDeadLettersRequest, context: Any
    ) -> m.RedriveDeadLettersResponse:
        from dataplane.store.message import MessageToStore

        self._group(request.group)
        if not request.all and not request.message_ids:
            raise _invalid("give message_ids or all")
        if len(request.message_ids) > 1000:
            raise _invalid("at most 1000 message ids per call")
        wanted = set(request.message_ids)
        candidates = self._dead_letters(request.group, _MAX_REDRIVE_SCAN, False)
        chosen = [x for x in candidates if request.all or (x.properties.get(p.P_UNIQ) or x.msg_id) in wanted]
        to_store: list[MessageToStore] = []
        sources: list[Any] = []
        for x in chosen:
            origin = x.properties.get(p.P_DLQ_TOPIC, "")
            config = self.broker.metadata.get_topic(origin)
            if config is None:
                logger.warning("dead letter %s: topic %r is gone; not re-driven", x.msg_id, origin)
                continue
            props = {k: v for k, v in x.properties.items() if k not in _DLQ_PROPS}
            props[c.P_REDRIVE_GROUP] = request.group
            qid_text = x.properties.get(c.P_DLQ_QUEUE, "0")
            qid = int(qid_text) if qid_text.isdigit() and int(qid_text) < config.queue_count else 0
            to_store.append(MessageToStore(origin, qid, x.body, props, 0, 0, x.born_timestamp, x.born_host))
            sources.append(x)
        redriven = 0
        dlq = dlq_topic(request.group)
        for start in range(0, len(to_store), 256):
            chunk = to_store[start : start + 256]
            result = await self.broker.store.put_messages_async(chunk)
            if not result.ok:
                raise AdminRejected(
                    grpc.StatusCode.UNAVAILABLE, f"store refused the messages: {result.status}"
                )
            done = sources[start : start + 256]
            self.redriven.add(
                dlq, (x.queue_offset for x in done), self.broker.store.get_min_offset_in_queue(dlq, 0)
            )
            for msg in chunk:
                self.broker.tracer.record(
                    msg.properties.get(p.P_UNIQ, ""),
                    msg.topic,
                    "redriven",
                    group=request.group,
                    detail=f"from {dlq} to queue {msg.queue_id}",
                )
            redriven += len(chunk)
        logger.info("%d dead letters of %s re-driven", redriven, request.group)
        return m.RedriveDeadLettersResponse(redriven=redriven)


def _range(r: m.TimeRange) -> tuple[int, int]:
    if r.begin_ms < 0 or r.end_ms < r.begin_ms:
        raise _invalid("time range: need 0 <= begin_ms <= end_ms")
    return r.begin_ms, r.end_ms


def _new_message_id() -> str:
    return os.urandom(16).hex().upper()


def _fifo_queue(message_group: str, count: int) -> int:
    """The queue the SDKs use for a message group: sha256(group) mod n."""
    import hashlib

    return int.from_bytes(hashlib.sha256(message_group.encode()).digest(), "big") % count


def _queue_of(broker: Broker, entry: svc.SendResultEntry) -> int:
    """Queue id of a just-sent message (the send result carries only the offset)."""
    store = broker.store
    if hasattr(store, "query_messages_by_uniq_key"):
        found = store.query_messages_by_uniq_key(entry.message_id, 1)
        if found:
            return int(found[0].properties.get("REAL_QID") or found[0].queue_id)
    return -1
