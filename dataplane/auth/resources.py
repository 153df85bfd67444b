"""What each v2 RPC touches: (resource type, Resource, actions), for namespace and ACL checks.

Every resource a request names is listed, so that no RPC can reach another tenant's topic or group.
Actions follow RocketMQ's proxy: producing is Pub on the topic; consuming (receive, ack, offsets,
assignment, DLQ) is Sub on the topic and the group; QueryRoute is Pub or Sub on the topic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from dataplane.security_store import AclAction, AclResourceType
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = ("Named", "Touch", "sent_topics", "settings_resources", "touched")


class Named(NamedTuple):
    """A resource as a request names it: the two fields of a ``pb.Resource`` the checks read, for
    the topics a SendMessage names (a tuple is made in a fraction of a message's time)."""

    resource_namespace: str
    name: str


Touch = tuple[AclResourceType, pb.Resource | Named, tuple[AclAction, ...]]

_T, _G = AclResourceType.TOPIC, AclResourceType.GROUP
_PUB = (AclAction.PUB,)
_SUB = (AclAction.SUB,)
_ROUTE = (AclAction.PUB, AclAction.SUB)


def _group(request: Any) -> list[Touch]:
    return [(_G, request.group, _SUB)] if request.HasField("group") and request.group.name else []


def _consume(topic_of: Callable[[Any], pb.Resource]) -> Callable[[Any], list[Touch]]:
    return lambda r: [(_G, r.group, _SUB), (_T, topic_of(r), _SUB)]


_EXTRACTORS: dict[str, Callable[[Any], list[Touch]]] = {
    "QueryRoute": lambda r: [(_T, r.topic, _ROUTE)],
    "Heartbeat": _group,
    "SendMessage": lambda r: [(_T, m.topic, _PUB) for m in r.messages],
    "QueryAssignment": _consume(lambda r: r.topic),
    "ReceiveMessage": _consume(lambda r: r.message_queue.topic),
    "AckMessage": _consume(lambda r: r.topic),
    "ForwardMessageToDeadLetterQueue": _consume(lambda r: r.topic),
    "PullMessage": _consume(lambda r: r.message_queue.topic),
    "UpdateOffset": _consume(lambda r: r.message_queue.topic),
    "GetOffset": _consume(lambda r: r.message_queue.topic),
    "QueryOffset": lambda r: [(_T, r.message_queue.topic, _SUB)],
    "EndTransaction": lambda r: [(_T, r.topic, _PUB)],
    "NotifyClientTermination": _group,
    "ChangeInvisibleDuration": _consume(lambda r: r.topic),
    "RecallMessage": lambda r: [(_T, r.topic, _PUB)],
    "SyncLiteSubscription": _consume(lambda r: r.topic),
}


def touched(rpc: str, request: Any) -> list[Touch]:
    """Resources of a unary/server-streaming request; an RPC not listed touches nothing named."""
    extractor = _EXTRACTORS.get(rpc)
    return extractor(request) if extractor is not None else []


def sent_topics(runs: list[tuple[str, str]]) -> list[Touch]:
    """What a SendMessage touches, from its topics as named (resource namespace, name), one per run
    of consecutive messages to the same topic (``produce.send_summary``): the same refusal, and the
    same tenant, as its ``touched`` list of one entry per message, since a run names one resource."""
    return [(_T, Named(ns, name), _PUB) for ns, name in runs]


def settings_resources(settings: pb.Settings) -> list[Touch]:
    """Resources a Telemetry Settings command declares (publishing topics, subscription)."""
    out: list[Touch] = []
    if settings.HasField("publishing"):
        out.extend((_T, t, _PUB) for t in settings.publishing.topics)
    if settings.HasField("subscription"):
        sub = settings.subscription
        if sub.HasField("group") and sub.group.name:
            out.append((_G, sub.group, _SUB))
        out.extend((_T, e.topic, _SUB) for e in sub.subscriptions)
    return out
