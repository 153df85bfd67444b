"""A thin client of a broker's message admin API (``mqcloud.admin.v1.MessageAdmin``).

Query messages (by id, key, time range or queue offset), send a test message, read a message's
trace, reset a group's offsets, list and re-drive dead letters. Names are qualified
(``ns%name``). Errors surface as :class:`mqcloud.admin_client.BrokerAdminError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, cast

import grpc

from mqcloud.admin.v1 import messages_pb2 as m
from mqcloud.admin.v1 import messages_pb2_grpc
from mqcloud.admin_client import BrokerAdminError, admin_channel, operator_metadata

__all__ = ("RESET_TARGETS", "MessageAdminClient")

RESET_TARGETS = {
    "beginning": m.RESET_TARGET_BEGINNING,
    "end": m.RESET_TARGET_END,
    "time": m.RESET_TARGET_TIME,
}


class MessageAdminClient:
    """``MessageAdminClient("127.0.0.1:8081").query_messages("ns%orders", key="o-1")``."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = 10.0,
        channel: grpc.Channel | None = None,
        token: str | None = None,
        root_certificates: bytes | None = None,
    ) -> None:
        self._channel = channel or admin_channel(target, root_certificates=root_certificates)
        self._stub = messages_pb2_grpc.MessageAdminStub(self._channel)
        self._timeout = timeout
        self._metadata = operator_metadata(token)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> MessageAdminClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _call(self, method: str, request: Any) -> Any:  # the generated stubs are untyped
        try:
            return getattr(self._stub, method)(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            raise BrokerAdminError(code.name if code else "UNKNOWN", exc.details() or "") from exc  # type: ignore[attr-defined]

    def query_messages(
        self,
        topic: str,
        *,
        message_id: str | None = None,
        key: str | None = None,
        begin_ms: int | None = None,
        end_ms: int | None = None,
        queue_id: int | None = None,
        offset: int | None = None,
        limit: int = 32,
    ) -> list[m.MessageView]:
        """One lookup: ``message_id``, ``key`` (optionally within begin/end), ``begin_ms``/``end_ms``,
        or ``queue_id`` + ``offset``."""
        request = m.QueryMessagesRequest(topic=topic, limit=limit)
        if message_id is not None:
            request.message_id = message_id
        elif key is not None:
            request.key = key
            if begin_ms is not None or end_ms is not None:
                request.range.CopyFrom(m.TimeRange(begin_ms=begin_ms or 0, end_ms=end_ms or (1 << 62)))
        elif begin_ms is not None or end_ms is not None:
            request.time_range.CopyFrom(m.TimeRange(begin_ms=begin_ms or 0, end_ms=end_ms or (1 << 62)))
        elif queue_id is not None:
            request.queue.CopyFrom(m.QueuePoint(queue_id=queue_id, offset=offset or 0))
        return list(self._call("QueryMessages", request).messages)

    def send_test_message(
        self,
        topic: str,
        body: bytes,
        *,
        tag: str = "",
        keys: Iterable[str] = (),
        properties: Mapping[str, str] | None = None,
        message_group: str = "",
        delivery_time_ms: int = 0,
        queue_id: int = -1,
    ) -> m.SendTestMessageResponse:
        request = m.SendTestMessageRequest(
            topic=topic,
            body=body,
            tag=tag,
            keys=list(keys),
            properties=dict(properties or {}),
            message_group=message_group,
            delivery_time_ms=delivery_time_ms,
            queue_id=queue_id,
        )
        return cast(m.SendTestMessageResponse, self._call("SendTestMessage", request))

    def message_trace(self, topic: str, message_id: str, limit: int = 256) -> list[m.TraceEvent]:
        request = m.GetMessageTraceRequest(topic=topic, message_id=message_id, limit=limit)
        return list(self._call("GetMessageTrace", request).events)

    def reset_offset(self, group: str, topic: str, to: str, time_ms: int = 0) -> list[m.QueuePoint]:
        """``to``: beginning, end or time (with ``time_ms``). Live consumers move at once."""
        target = RESET_TARGETS.get(to.lower())
        if target is None:
            raise ValueError(f"to must be one of {sorted(RESET_TARGETS)}")
        request = m.ResetOffsetRequest(group=group, topic=topic, to=target, time_ms=time_ms)
        return list(self._call("ResetOffset", request).queues)

    def list_dead_letters(
        self, group: str, limit: int = 32, *, include_redriven: bool = False
    ) -> list[m.MessageView]:
        request = m.ListDeadLettersRequest(group=group, limit=limit, include_redriven=include_redriven)
        return list(self._call("ListDeadLetters", request).messages)

    def redrive(self, group: str, message_ids: Iterable[str] = (), *, all: bool = False) -> int:
        """Send dead letters back to their topic for ``group`` only; returns how many."""
        request = m.RedriveDeadLettersRequest(group=group, message_ids=list(message_ids), all=all)
        return int(self._call("RedriveDeadLetters", request).redriven)
