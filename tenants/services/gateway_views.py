"""The data-plane part of the broker gateway: what the console and the CLI read from brokers (stats,
clients, lag, messages, traces, dead letters) and the few data operations (test send, offset reset,
redrive).

``DataPlaneViews`` is the interface ``BrokerGateway`` extends; ``GrpcDataPlaneViews`` calls the
brokers' BrokerAdmin and MessageAdmin services; ``InMemoryDataPlaneViews`` is the fake for tests,
with just enough semantics (offsets, lag, dead letters) to exercise the services. Names are
qualified (``ns%name``); endpoints are broker nodes' gRPC addresses.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from tenants.errors import BrokerUnavailable, ControlPlaneError

__all__ = (
    "ClientInfo",
    "DataPlaneViews",
    "GroupQueueLag",
    "GrpcDataPlaneViews",
    "InMemoryDataPlaneViews",
    "MessageDraft",
    "MessageQuery",
    "MessageRecord",
    "QueueStats",
    "SentMessage",
    "TraceEventRecord",
)


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One stored message; ``topic`` qualified (for a dead letter: its original topic)."""

    message_id: str
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    tag: str = ""
    keys: tuple[str, ...] = ()
    message_group: str = ""
    born_ms: int = 0
    store_ms: int = 0
    delivery_ms: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)
    system_properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MessageQuery:
    """Exactly one of: ``message_id``, ``key``, ``begin_ms``/``end_ms``, ``queue_id`` + ``offset``."""

    message_id: str | None = None
    key: str | None = None
    begin_ms: int | None = None
    end_ms: int | None = None
    queue_id: int | None = None
    offset: int | None = None
    limit: int = 32


@dataclass(frozen=True, slots=True)
class MessageDraft:
    body: bytes
    tag: str = ""
    keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    message_group: str = ""
    delivery_ms: int = 0


@dataclass(frozen=True, slots=True)
class SentMessage:
    message_id: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True, slots=True)
class QueueStats:
    queue_id: int
    min_offset: int
    max_offset: int
    last_store_ms: int  # 0: empty queue


@dataclass(frozen=True, slots=True)
class ClientInfo:
    client_id: str
    language: str
    version: str
    address: str
    client_type: str  # PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER, ...
    group: str  # qualified; "" for producers
    topics: tuple[str, ...]  # qualified
    last_seen_ms: int
    namespace: str = ""


@dataclass(frozen=True, slots=True)
class GroupQueueLag:
    topic: str  # qualified
    queue_id: int
    committed_offset: int
    max_offset: int
    lag: int
    inflight: int
    lag_ms: int


@dataclass(frozen=True, slots=True)
class TraceEventRecord:
    event: str
    time_ms: int
    group: str = ""
    attempt: int = 0
    client_id: str = ""
    detail: str = ""


class DataPlaneViews(Protocol):
    """Reads and data operations on one broker node."""

    def topic_stats(self, endpoint: str, topic: str) -> list[QueueStats]: ...
    def list_clients(self, endpoint: str, namespace: str, group: str = "") -> list[ClientInfo]: ...
    def group_lag(self, endpoint: str, group: str) -> list[GroupQueueLag]: ...
    def query_messages(self, endpoint: str, topic: str, query: MessageQuery) -> list[MessageRecord]: ...
    def send_message(self, endpoint: str, topic: str, draft: MessageDraft) -> SentMessage: ...
    def message_trace(self, endpoint: str, topic: str, message_id: str) -> list[TraceEventRecord]: ...
    def reset_offset(
        self, endpoint: str, group: str, topic: str, to: str, time_ms: int = 0
    ) -> list[tuple[int, int]]: ...
    def list_dead_letters(self, endpoint: str, group: str, limit: int) -> list[MessageRecord]: ...
    def redrive(self, endpoint: str, group: str, message_ids: Iterable[str], all_: bool) -> int: ...


#
# The fake
#


@dataclass
class _FakeBroker:
    messages: list[MessageRecord] = field(default_factory=list)
    clients: list[ClientInfo] = field(default_factory=list)
    traces: dict[str, list[TraceEventRecord]] = field(default_factory=dict)
    # (group, topic, queue) -> committed offset; (group, topic, queue) -> in flight
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    inflight: dict[tuple[str, str, int], int] = field(default_factory=dict)
    dead_letters: dict[str, list[MessageRecord]] = field(default_factory=dict)


class InMemoryDataPlaneViews:
    """Brokers' data as lists; tests seed them through :meth:`fake_broker`.

    Expects the host class to provide ``_check(endpoint, op)`` (``InMemoryBrokerGateway`` does).
    """

    if TYPE_CHECKING:

        def _check(self, endpoint: str, op: str) -> None: ...

    def fake_broker(self, endpoint: str) -> _FakeBroker:
        brokers = self.__dict__.setdefault("_fake_brokers", {})
        return brokers.setdefault(endpoint, _FakeBroker())  # type: ignore[no-any-return]

    def _trace(self, b: _FakeBroker, message_id: str, event: str, **kw: Any) -> None:
        b.traces.setdefault(message_id, []).append(TraceEventRecord(event, int(time.time() * 1000), **kw))

    def topic_stats(self, endpoint: str, topic: str) -> list[QueueStats]:
        self._check(endpoint, "topic_stats")
        b = self.fake_broker(endpoint)
        queues = sorted({m.queue_id for m in b.messages if m.topic == topic})
        out = []
        for qid in queues:
            mine = [m for m in b.messages if m.topic == topic and m.queue_id == qid]
            out.append(QueueStats(qid, 0, len(mine), max(m.store_ms for m in mine)))
        return out

    def list_clients(self, endpoint: str, namespace: str, group: str = "") -> list[ClientInfo]:
        self._check(endpoint, "list_clients")
        return [
            c
            for c in self.fake_broker(endpoint).clients
            if c.namespace == namespace and (not group or c.group == group)
        ]

    def group_lag(self, endpoint: str, group: str) -> list[GroupQueueLag]:
        self._check(endpoint, "group_lag")
        b = self.fake_broker(endpoint)
        out = []
        for (g, topic, qid), committed in sorted(b.offsets.items()):
            if g != group:
                continue
            high = len([m for m in b.messages if m.topic == topic and m.queue_id == qid])
            lag = max(high - committed, 0)
            out.append(GroupQueueLag(topic, qid, committed, high, lag, b.inflight.get((g, topic, qid), 0), 0))
        return out

    def query_messages(self, endpoint: str, topic: str, query: MessageQuery) -> list[MessageRecord]:
        self._check(endpoint, "query_messages")
        found = [m for m in self.fake_broker(endpoint).messages if m.topic == topic]
        if query.message_id is not None:
            found = [m for m in found if m.message_id == query.message_id]
        elif query.key is not None:
            found = [m for m in found if query.key in m.keys]
        elif query.begin_ms is not None or query.end_ms is not None:
            begin, end = query.begin_ms or 0, query.end_ms or (1 << 62)
            found = [m for m in found if begin <= m.store_ms <= end]
        elif query.queue_id is not None:
            found = [
                m for m in found if m.queue_id == query.queue_id and m.queue_offset >= (query.offset or 0)
            ]
        return found[: query.limit]

    def send_message(self, endpoint: str, topic: str, draft: MessageDraft) -> SentMessage:
        self._check(endpoint, "send_message")
        if not draft.body:
            raise ControlPlaneError("MESSAGE_BODY_EMPTY: message body is empty")
        b = self.fake_broker(endpoint)
        offset = len([m for m in b.messages if m.topic == topic and m.queue_id == 0])
        now = int(time.time() * 1000)
        record = MessageRecord(
            message_id=f"FAKE{len(b.messages):028X}",
            topic=topic,
            queue_id=0,
            queue_offset=offset,
            body=draft.body,
            tag=draft.tag,
            keys=draft.keys,
            message_group=draft.message_group,
            born_ms=now,
            store_ms=now,
            delivery_ms=draft.delivery_ms,
            properties=dict(draft.properties),
        )
        b.messages.append(record)
        self._trace(b, record.message_id, "stored")
        return SentMessage(record.message_id, 0, offset)

    def message_trace(self, endpoint: str, topic: str, message_id: str) -> list[TraceEventRecord]:
        self._check(endpoint, "message_trace")
        b = self.fake_broker(endpoint)
        if not any(m.message_id == message_id and m.topic == topic for m in b.messages):
            return []
        return list(b.traces.get(message_id, []))

    def reset_offset(
        self, endpoint: str, group: str, topic: str, to: str, time_ms: int = 0
    ) -> list[tuple[int, int]]:
        self._check(endpoint, "reset_offset")
        b = self.fake_broker(endpoint)
        mine = [m for m in b.messages if m.topic == topic]
        out = []
        for qid in sorted(
            {m.queue_id for m in mine} | {q for g, t, q in b.offsets if (g, t) == (group, topic)}
        ):
            queue = [m for m in mine if m.queue_id == qid]
            if to == "beginning":
                offset = 0
            elif to == "end":
                offset = len(queue)
            else:
                offset = next((m.queue_offset for m in queue if m.store_ms >= time_ms), len(queue))
            b.offsets[(group, topic, qid)] = offset
            b.inflight.pop((group, topic, qid), None)
            out.append((qid, offset))
        return out

    def list_dead_letters(self, endpoint: str, group: str, limit: int) -> list[MessageRecord]:
        self._check(endpoint, "list_dead_letters")
        return list(self.fake_broker(endpoint).dead_letters.get(group, []))[:limit]

    def redrive(self, endpoint: str, group: str, message_ids: Iterable[str], all_: bool) -> int:
        self._check(endpoint, "redrive")
        b = self.fake_broker(endpoint)
        wanted = set(message_ids)
        dead = b.dead_letters.get(group, [])
        chosen = [m for m in dead if all_ or m.message_id in wanted]
        b.dead_letters[group] = [m for m in dead if m not in chosen]
        for m in chosen:
            offset = len([x for x in b.messages if x.topic == m.topic and x.queue_id == m.queue_id])
            b.messages.append(replace(m, queue_offset=offset, system_properties={}))
            self._trace(b, m.message_id, "redriven", group=group)
        return len(chosen)


#
# The real brokers
#


def _view(v: Any, topic: str | None = None) -> MessageRecord:
    return MessageRecord(
        message_id=v.message_id,
        topic=topic or v.topic,
        queue_id=int(v.queue_id),
        queue_offset=int(v.queue_offset),
        body=bytes(v.body),
        tag=v.tag,
        keys=tuple(v.keys),
        message_group=v.message_group,
        born_ms=int(v.born_time_ms),
        store_ms=int(v.store_time_ms),
        delivery_ms=int(v.delivery_time_ms),
        properties=dict(v.properties),
        system_properties=dict(v.system_properties),
    )


class GrpcDataPlaneViews:
    """Through ``BrokerAdminClient`` (stats, lag, clients) and ``MessageAdminClient`` (the rest).

    A broker that does not know the topic or group (not provisioned there yet) answers nothing;
    INVALID_ARGUMENT is the caller's mistake (400 ``invalid``); other errors are BrokerUnavailable.
    """

    timeout_s: float
    # The operator credentials the host gateway was built with (BrokerGateway sets them).
    _token: str | None
    _root_certificates: bytes | None

    if TYPE_CHECKING:

        def _client(self, endpoint: str) -> Any: ...

    def _messages(self, endpoint: str) -> Any:
        clients = self.__dict__.setdefault("_msg_clients", {})
        client = clients.get(endpoint)
        if client is None:
            from mqcloud.admin_messages import MessageAdminClient

            client = clients[endpoint] = MessageAdminClient(
                endpoint,
                timeout=self.timeout_s,
                token=self._token,
                root_certificates=self._root_certificates,
            )
        return client

    def _view_call(self, client: Any, endpoint: str, method: str, *args: Any, **kwargs: Any) -> Any:
        from mqcloud.admin_client import BrokerAdminError

        try:
            return getattr(client, method)(*args, **kwargs)
        except BrokerAdminError as exc:
            if exc.code == "NOT_FOUND":
                return None
            if exc.code == "INVALID_ARGUMENT":
                raise ControlPlaneError(exc.message or "The broker refused the request.") from exc
            raise BrokerUnavailable(f"{endpoint}: {method} failed: {exc}") from exc

    def topic_stats(self, endpoint: str, topic: str) -> list[QueueStats]:
        stats = self._view_call(self._client(endpoint), endpoint, "topic_stats", topic)
        if stats is None:
            return []
        return [
            QueueStats(int(q.queue_id), int(q.min_offset), int(q.max_offset), int(q.last_store_time_ms))
            for q in stats.queues
        ]

    def list_clients(self, endpoint: str, namespace: str, group: str = "") -> list[ClientInfo]:
        found = self._view_call(self._client(endpoint), endpoint, "list_clients", namespace, group) or ()
        return [
            ClientInfo(
                client_id=c.client_id,
                language=c.language,
                version=c.version,
                address=c.address,
                client_type=c.client_type,
                group=c.group,
                topics=tuple(c.topics),
                last_seen_ms=int(c.last_heartbeat_ms),
                namespace=c.namespace,
            )
            for c in found
        ]

    def group_lag(self, endpoint: str, group: str) -> list[GroupQueueLag]:
        stats = self._view_call(self._client(endpoint), endpoint, "group_stats", group)
        if stats is None:
            return []
        return [
            GroupQueueLag(
                q.topic,
                int(q.queue_id),
                int(q.committed_offset),
                int(q.max_offset),
                int(q.lag_messages),
                int(q.in_flight),
                int(q.lag_ms),
            )
            for q in stats.queues
        ]

    def query_messages(self, endpoint: str, topic: str, query: MessageQuery) -> list[MessageRecord]:
        kwargs = {f.name: getattr(query, f.name) for f in dataclasses.fields(query)}
        found = self._view_call(self._messages(endpoint), endpoint, "query_messages", topic, **kwargs)
        return [_view(v) for v in found or ()]

    def send_message(self, endpoint: str, topic: str, draft: MessageDraft) -> SentMessage:
        sent = self._view_call(
            self._messages(endpoint),
            endpoint,
            "send_test_message",
            topic,
            draft.body,
            tag=draft.tag,
            keys=draft.keys,
            properties=draft.properties,
            message_group=draft.message_group,
            delivery_time_ms=draft.delivery_ms,
        )
        if sent is None:
            raise BrokerUnavailable(f"{endpoint}: the topic is not provisioned on this broker yet")
        return SentMessage(sent.message_id, int(sent.queue_id), int(sent.queue_offset))

    def message_trace(self, endpoint: str, topic: str, message_id: str) -> list[TraceEventRecord]:
        found = self._view_call(self._messages(endpoint), endpoint, "message_trace", topic, message_id)
        return [
            TraceEventRecord(e.event, int(e.time_ms), e.group, int(e.attempt), e.client_id, e.detail)
            for e in found or ()
        ]

    def reset_offset(
        self, endpoint: str, group: str, topic: str, to: str, time_ms: int = 0
    ) -> list[tuple[int, int]]:
        found = self._view_call(self._messages(endpoint), endpoint, "reset_offset", group, topic, to, time_ms)
        return [(int(q.queue_id), int(q.offset)) for q in found or ()]

    def list_dead_letters(self, endpoint: str, group: str, limit: int) -> list[MessageRecord]:
        found = self._view_call(self._messages(endpoint), endpoint, "list_dead_letters", group, limit)
        return [_view(v) for v in found or ()]

    def redrive(self, endpoint: str, group: str, message_ids: Iterable[str], all_: bool) -> int:
        n = self._view_call(self._messages(endpoint), endpoint, "redrive", group, list(message_ids), all=all_)
        return int(n or 0)
