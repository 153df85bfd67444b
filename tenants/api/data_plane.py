"""Data-plane views on topics and consumer groups (the REST contract of the console and the CLI):
statistics, clients, messages, traces, lag, offset reset, dead letters. Mixed into ``TopicViewSet``
and ``ConsumerGroupViewSet``; reads for members, writes for the viewset's ``write_roles``."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from tenants.models import Topic
from tenants.services import messages, observe
from tenants.services.gateway_views import MessageDraft, MessageQuery
from tenants.services.lag_history import HISTORY_RANGES
from tenants.services.lag_history import lag_history as stored_lag

__all__ = ("GroupDataPlaneViews", "TopicDataPlaneViews")

MAX_LIMIT = 256
MAX_BODY_BYTES = 4 << 20

#
# Serializers (requests are validated with them; responses are described by them)
#


class MessageSerializer(serializers.Serializer):  # type: ignore[type-arg]
    message_id = serializers.CharField()
    topic = serializers.CharField()
    queue_id = serializers.IntegerField()
    queue_offset = serializers.IntegerField()
    broker = serializers.CharField()
    tag = serializers.CharField(allow_blank=True)
    keys = serializers.ListField(child=serializers.CharField())
    message_group = serializers.CharField(allow_blank=True)
    born_time = serializers.DateTimeField(allow_null=True)
    store_time = serializers.DateTimeField(allow_null=True)
    delivery_time = serializers.DateTimeField(allow_null=True)
    body_base64 = serializers.CharField(allow_blank=True)
    body_size = serializers.IntegerField()
    properties = serializers.DictField(child=serializers.CharField())
    system_properties = serializers.DictField(child=serializers.CharField())


class MessageListSerializer(serializers.Serializer):  # type: ignore[type-arg]
    results = MessageSerializer(many=True)


class QueueStatsSerializer(serializers.Serializer):  # type: ignore[type-arg]
    broker = serializers.CharField()
    queue_id = serializers.IntegerField()
    min_offset = serializers.IntegerField()
    max_offset = serializers.IntegerField()
    last_store_time = serializers.DateTimeField(allow_null=True)


class TopicStatsSerializer(serializers.Serializer):  # type: ignore[type-arg]
    topic = serializers.CharField()
    queues = QueueStatsSerializer(many=True)
    messages_total = serializers.IntegerField()


class ClientSerializer(serializers.Serializer):  # type: ignore[type-arg]
    client_id = serializers.CharField()
    language = serializers.CharField(allow_blank=True)
    version = serializers.CharField(allow_blank=True)
    address = serializers.CharField(allow_blank=True)
    broker = serializers.CharField()
    last_seen = serializers.DateTimeField(allow_null=True)


class ClientListSerializer(serializers.Serializer):  # type: ignore[type-arg]
    results = ClientSerializer(many=True)


class MessageQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Exactly one of: ``message_id``; ``key``; ``begin``/``end``; ``queue_id`` (+ ``offset``)."""

    message_id = serializers.CharField(required=False, max_length=128)
    key = serializers.CharField(required=False, max_length=128)
    begin = serializers.DateTimeField(required=False)
    end = serializers.DateTimeField(required=False)
    queue_id = serializers.IntegerField(required=False, min_value=0, max_value=1023)
    offset = serializers.IntegerField(required=False, min_value=0, max_value=(1 << 62))
    broker = serializers.CharField(required=False, max_length=64)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=32)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        modes = [
            "message_id" in attrs,
            "key" in attrs,
            "begin" in attrs or "end" in attrs,
            "queue_id" in attrs,
        ]
        if sum(modes) != 1:
            raise serializers.ValidationError(
                "Give exactly one of: message_id, key, begin/end, queue_id (+ offset)."
            )
        if "offset" in attrs and "queue_id" not in attrs:
            raise serializers.ValidationError({"offset": ["offset needs queue_id."]})
        if "key" in attrs and " " in attrs["key"]:
            raise serializers.ValidationError({"key": ["Keys have no spaces."]})
        if "begin" in attrs and "end" in attrs and attrs["end"] < attrs["begin"]:
            raise serializers.ValidationError({"end": ["end is before begin."]})
        return attrs

    def to_query(self) -> MessageQuery:
        d = self.validated_data
        return MessageQuery(
            message_id=d.get("message_id"),
            key=d.get("key"),
            begin_ms=_ms(d["begin"]) if "begin" in d else (0 if "end" in d else None),
            end_ms=_ms(d["end"]) if "end" in d else ((1 << 62) if "begin" in d else None),
            queue_id=d.get("queue_id"),
            offset=d.get("offset", 0) if "queue_id" in d else None,
            limit=d["limit"],
        )


def _ms(value: Any) -> int:
    return max(int(value.timestamp() * 1000), 0)


class SendMessageSerializer(serializers.Serializer):  # type: ignore[type-arg]
    body = serializers.CharField(
        required=False, allow_blank=False, trim_whitespace=False, max_length=MAX_BODY_BYTES
    )
    body_base64 = serializers.CharField(required=False, max_length=(MAX_BODY_BYTES * 4) // 3 + 4)
    tag = serializers.CharField(required=False, max_length=128)
    keys = serializers.ListField(child=serializers.CharField(max_length=128), required=False, max_length=64)
    properties = serializers.DictField(
        child=serializers.CharField(max_length=16384, allow_blank=True), required=False
    )
    message_group = serializers.CharField(required=False, max_length=128)
    delivery_time = serializers.DateTimeField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("body" in attrs) == ("body_base64" in attrs):
            raise serializers.ValidationError("Give body or body_base64.")
        if "body_base64" in attrs:
            try:
                attrs["body_bytes"] = base64.b64decode(attrs["body_base64"], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise serializers.ValidationError({"body_base64": ["Not valid base64."]}) from exc
        else:
            attrs["body_bytes"] = attrs["body"].encode()
        if not attrs["body_bytes"]:
            raise serializers.ValidationError({"body": ["The body is empty."]})
        if len(attrs["body_bytes"]) > MAX_BODY_BYTES:
            raise serializers.ValidationError({"body": [f"At most {MAX_BODY_BYTES} bytes."]})
        if "message_group" in attrs and "delivery_time" in attrs:
            raise serializers.ValidationError("A message has a message_group or a delivery_time, not both.")
        if len(attrs.get("properties", {})) > 128:
            raise serializers.ValidationError({"properties": ["At most 128 properties."]})
        return attrs

    def to_draft(self) -> MessageDraft:
        d = self.validated_data
        return MessageDraft(
            body=d["body_bytes"],
            tag=d.get("tag", ""),
            keys=tuple(d.get("keys", ())),
            properties=dict(d.get("properties", {})),
            message_group=d.get("message_group", ""),
            delivery_ms=_ms(d["delivery_time"]) if "delivery_time" in d else 0,
        )


class SentMessageSerializer(serializers.Serializer):  # type: ignore[type-arg]
    message_id = serializers.CharField()
    queue_id = serializers.IntegerField()
    queue_offset = serializers.IntegerField()
    broker = serializers.CharField()


class TraceEventSerializer(serializers.Serializer):  # type: ignore[type-arg]
    event = serializers.ChoiceField(
        choices=[
            "stored",
            "delivered",
            "acked",
            "nacked",
            "invisible_changed",
            "retried",
            "dead_lettered",
            "redriven",
        ]
    )
    time = serializers.DateTimeField()
    group = serializers.CharField(allow_null=True)
    attempt = serializers.IntegerField(allow_null=True)
    client_id = serializers.CharField(allow_null=True)
    detail = serializers.CharField(allow_blank=True)


class MessageTraceSerializer(serializers.Serializer):  # type: ignore[type-arg]
    message_id = serializers.CharField()
    events = TraceEventSerializer(many=True)


class GroupQueueLagSerializer(serializers.Serializer):  # type: ignore[type-arg]
    topic = serializers.CharField()
    broker = serializers.CharField()
    queue_id = serializers.IntegerField()
    committed_offset = serializers.IntegerField()
    max_offset = serializers.IntegerField()
    lag = serializers.IntegerField()
    inflight = serializers.IntegerField()
    lag_ms = serializers.IntegerField()


class GroupLagSerializer(serializers.Serializer):  # type: ignore[type-arg]
    group = serializers.CharField()
    total_lag = serializers.IntegerField()
    queues = GroupQueueLagSerializer(many=True)


class LagPointSerializer(serializers.Serializer):  # type: ignore[type-arg]
    at = serializers.DateTimeField()
    lag = serializers.IntegerField()
    lag_ms = serializers.IntegerField()


class LagHistorySerializer(serializers.Serializer):  # type: ignore[type-arg]
    group = serializers.CharField()
    range = serializers.CharField()
    points = LagPointSerializer(many=True)


class ResetOffsetSerializer(serializers.Serializer):  # type: ignore[type-arg]
    topic = serializers.CharField(max_length=100, help_text="Topic name (or id) of the group's tenant.")
    to = serializers.ChoiceField(choices=["beginning", "end", "time"])
    time = serializers.DateTimeField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["to"] == "time" and "time" not in attrs:
            raise serializers.ValidationError({"time": ["Needed to reset to a time."]})
        return attrs


class QueueOffsetSerializer(serializers.Serializer):  # type: ignore[type-arg]
    broker = serializers.CharField()
    queue_id = serializers.IntegerField()
    offset = serializers.IntegerField()


class ResetOffsetResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    queues = QueueOffsetSerializer(many=True)


class RedriveSerializer(serializers.Serializer):  # type: ignore[type-arg]
    message_ids = serializers.ListField(
        child=serializers.CharField(max_length=128), required=False, max_length=1000
    )
    all = serializers.BooleanField(required=False, default=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("all") and not attrs.get("message_ids"):
            raise serializers.ValidationError("Give message_ids or all: true.")
        return attrs


class RedriveResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    redriven = serializers.IntegerField()


_LIMIT = OpenApiParameter("limit", int, description=f"1..{MAX_LIMIT} (default 32)")
_QUERY_PARAMS = [
    OpenApiParameter("message_id", str),
    OpenApiParameter("key", str),
    OpenApiParameter("begin", str, description="ISO-8601 time"),
    OpenApiParameter("end", str, description="ISO-8601 time"),
    OpenApiParameter("queue_id", int),
    OpenApiParameter("offset", int),
    OpenApiParameter("broker", str, description="Only this broker (queue ids are per broker)."),
    _LIMIT,
]


def _limit(request: Request) -> int:
    params = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT)
    raw = request.query_params.get("limit")
    if raw is None:
        return 32
    try:
        return int(params.run_validation(raw))
    except serializers.ValidationError as exc:
        raise serializers.ValidationError({"limit": exc.detail}) from exc


#
# The viewset mixins
#


class TopicDataPlaneViews:
    """``stats/``, ``producers/``, ``messages/`` (GET query, POST test send), ``messages/{id}/trace/``."""

    get_object: Any
    actor: Any

    @extend_schema(request=None, responses={200: TopicStatsSerializer})
    @action(detail=True, methods=["get"])
    def stats(self, request: Request, pk: str | None = None) -> Response:
        """Per-queue offsets and last store time, on each broker holding the topic."""
        return Response(observe.topic_stats(self.get_object()))

    @extend_schema(request=None, responses={200: ClientListSerializer})
    @action(detail=True, methods=["get"])
    def producers(self, request: Request, pk: str | None = None) -> Response:
        """Producers connected now that publish to the topic."""
        return Response({"results": observe.topic_producers(self.get_object())})

    @extend_schema(
        methods=["GET"], parameters=_QUERY_PARAMS, request=None, responses={200: MessageListSerializer}
    )
    @extend_schema(methods=["POST"], request=SendMessageSerializer, responses={201: SentMessageSerializer})
    @action(detail=True, methods=["get", "post"])
    def messages(self, request: Request, pk: str | None = None) -> Response:
        """GET: look messages up; POST: send a test message."""
        topic = self.get_object()
        if request.method == "POST":
            body = SendMessageSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            sent = messages.send_test_message(topic, body.to_draft())
            return Response(sent, status=status.HTTP_201_CREATED)
        query = MessageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = messages.query_messages(topic, query.to_query(), query.validated_data.get("broker"))
        return Response({"results": found})

    @extend_schema(request=None, responses={200: MessageTraceSerializer})
    @action(detail=True, methods=["get"], url_path=r"messages/(?P<message_id>[A-Za-z0-9_.:\-]{1,128})/trace")
    def trace(self, request: Request, pk: str | None = None, message_id: str = "") -> Response:
        """The life of one message: stored, deliveries, acks, retries, dead letter, redrive."""
        events = messages.message_trace(self.get_object(), message_id)
        if events is None:
            raise NotFound(f"No broker knows message {message_id} of this topic.")
        return Response({"message_id": message_id, "events": events})


class GroupDataPlaneViews:
    """``lag/``, ``lag-history/``, ``clients/``, ``reset-offset/``, ``dlq/``, ``dlq/redrive/``."""

    get_object: Any
    actor: Any

    @extend_schema(request=None, responses={200: GroupLagSerializer})
    @action(detail=True, methods=["get"])
    def lag(self, request: Request, pk: str | None = None) -> Response:
        """Per topic queue: committed and max offset, lag (messages and ms), messages in flight."""
        return Response(observe.group_lag(self.get_object()))

    @extend_schema(request=None, responses={200: ClientListSerializer})
    @action(detail=True, methods=["get"])
    def clients(self, request: Request, pk: str | None = None) -> Response:
        """Consumers of the group connected now."""
        return Response({"results": observe.group_clients(self.get_object())})

    @extend_schema(
        parameters=[OpenApiParameter("range", str, enum=list(HISTORY_RANGES), default="24h")],
        request=None,
        responses={200: LagHistorySerializer},
    )
    @action(detail=True, methods=["get"], url_path="lag-history")
    def lag_history(self, request: Request, pk: str | None = None) -> Response:
        """The group's stored lag samples (one a minute, kept 7 days), oldest first."""
        span = request.query_params.get("range", "24h")
        if span not in HISTORY_RANGES:
            raise serializers.ValidationError({"range": [f"One of {', '.join(HISTORY_RANGES)}."]})
        group = self.get_object()
        points = stored_lag(group, HISTORY_RANGES[span])
        data = {"group": group.name, "range": span, "points": points}
        return Response(LagHistorySerializer(data).data)

    @extend_schema(request=ResetOffsetSerializer, responses={200: ResetOffsetResultSerializer})
    @action(detail=True, methods=["post"], url_path="reset-offset")
    def reset_offset(self, request: Request, pk: str | None = None) -> Response:
        """Move the group's offsets on a topic; live consumers continue from there at once."""
        group = self.get_object()
        body = ResetOffsetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        topics = Topic.objects.filter(tenant_id=group.tenant_id)
        topic = topics.filter(name=d["topic"]).first()
        if topic is None and d["topic"].isdigit():
            topic = topics.filter(pk=int(d["topic"])).first()
        if topic is None:
            raise serializers.ValidationError({"topic": ["No such topic in the group's tenant."]})
        time_ms = _ms(d["time"]) if d["to"] == "time" else 0
        queues = messages.reset_offset(self.actor, group, topic, d["to"], time_ms)
        return Response({"queues": queues})

    @extend_schema(parameters=[_LIMIT], request=None, responses={200: MessageListSerializer})
    @action(detail=True, methods=["get"])
    def dlq(self, request: Request, pk: str | None = None) -> Response:
        """The group's dead letters (not yet re-driven)."""
        group = self.get_object()
        return Response({"results": messages.list_dead_letters(group, _limit(request))})

    @extend_schema(request=RedriveSerializer, responses={200: RedriveResultSerializer})
    @action(detail=True, methods=["post"], url_path="dlq/redrive")
    def dlq_redrive(self, request: Request, pk: str | None = None) -> Response:
        """Send dead letters back to their original topic, for this group only."""
        group = self.get_object()
        body = RedriveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        count = messages.redrive_dead_letters(self.actor, group, d.get("message_ids", []), d["all"])
        return Response({"redriven": count})
