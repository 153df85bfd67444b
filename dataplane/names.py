"""Resource names inside the broker: namespace resolution and qualification.

A tenant's resources are qualified as ``{namespace}%{name}``; without a namespace the bare name is
used. Retry and dead-letter topics follow RocketMQ: ``%RETRY%{qualified group}``,
``%DLQ%{qualified group}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dataplane.errors import BadRequest, IllegalGroup, IllegalTopic
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = (
    "BROADCAST_SEP",
    "DLQ_PREFIX",
    "NAMESPACE_HEADER",
    "RETRY_PREFIX",
    "base_group",
    "dlq_topic",
    "is_broadcast_member",
    "namespace_from_metadata",
    "qualify",
    "resolve",
    "split",
)

NAMESPACE_HEADER = "x-mq-namespace"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
# Broadcast groups keep one POP position per member: "{group}@{client id}" (docs/broker.md).
BROADCAST_SEP = "@"
_NAME_RE = re.compile(r"^[A-Za-z0-9_\-]{1,127}$")
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_\-]{0,63}$")


def base_group(pop_group: str) -> str:
    """The consumer group of a POP position name (a broadcast member's name without the client)."""
    return pop_group.partition(BROADCAST_SEP)[0]


def is_broadcast_member(pop_group: str) -> bool:
    return BROADCAST_SEP in pop_group


def namespace_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    for key, value in metadata or ():
        if key == NAMESPACE_HEADER:
            return value.decode() if isinstance(value, bytes) else value
    return ""


def qualify(namespace: str, name: str) -> str:
    return f"{namespace}%{name}" if namespace else name


def split(qualified: str) -> tuple[str, str]:
    """Inverse of :func:`qualify` for topic/group names: (namespace, name)."""
    namespace, sep, name = qualified.partition("%")
    return (namespace, name) if sep else ("", qualified)


def dlq_topic(qualified_group: str) -> str:
    return f"{DLQ_PREFIX}{qualified_group}"


def resolve(resource: pb.Resource, header_namespace: str, *, kind: str = "topic") -> tuple[str, str]:
    """(namespace, qualified name) of a request resource.

    ``resource_namespace`` wins when set; otherwise the ``x-mq-namespace`` header (Node only sets the
    former on a few resources). A conflict between the two is refused.
    """
    error = IllegalGroup if kind == "group" else IllegalTopic
    namespace = resource.resource_namespace or header_namespace
    if resource.resource_namespace and header_namespace and resource.resource_namespace != header_namespace:
        raise BadRequest(
            f"namespace conflict: resource says {resource.resource_namespace!r}, "
            f"header says {header_namespace!r}"
        )
    if not _NAMESPACE_RE.match(namespace):
        raise error(f"illegal namespace {namespace!r}")
    if not _NAME_RE.match(resource.name):
        raise error(f"illegal {kind} name {resource.name!r}: 1-127 of [A-Za-z0-9_-]")
    return namespace, qualify(namespace, resource.name)
