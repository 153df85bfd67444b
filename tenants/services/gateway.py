"""The seam between provisioning and brokers: what the control plane needs from a broker's admin API.

``BrokerGateway`` is the interface; ``GrpcBrokerGateway`` talks to real brokers through
``mqcloud.admin_client.BrokerAdminClient``; ``InMemoryBrokerGateway`` is a faithful fake for tests
and for running the control plane without brokers. Every call is idempotent: upserts replace,
deletes of missing objects succeed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, final

from tenants.errors import BrokerUnavailable

__all__ = (
    "AccessKeySpec",
    "AclSpec",
    "BrokerGateway",
    "GroupSpec",
    "GrpcBrokerGateway",
    "InMemoryBrokerGateway",
    "QuotaSpec",
    "TopicSpec",
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic as one broker group holds it; ``name`` is qualified (``ns%topic``)."""

    name: str
    queue_count: int
    message_type: str
    retention_hours: int | None = None
    tiered_retention_hours: int | None = None
    max_message_bytes: int | None = None

    def drifted_from(self, actual: TopicSpec) -> bool:
        """Whether a broker's copy needs repair; fields the broker did not report are not compared."""
        return any(
            getattr(actual, name) is not None and getattr(actual, name) != getattr(self, name)
            for name in ("queue_count", "message_type", "retention_hours", "max_message_bytes")
        )


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """A consumer group on a broker; ``name`` is qualified (``ns%group``)."""

    name: str
    fifo: bool = False
    broadcast: bool = False
    max_delivery_attempts: int = 16
    retry_policy: str = "EXPONENTIAL"
    retry_initial_backoff_ms: int = 1000
    retry_max_backoff_ms: int = 7_200_000

    def drifted_from(self, actual: GroupSpec) -> bool:
        return (self.fifo, self.broadcast, self.max_delivery_attempts) != (
            actual.fifo,
            actual.broadcast,
            actual.max_delivery_attempts,
        )


@dataclass(frozen=True, slots=True)
class AccessKeySpec:
    namespace: str
    access_key: str
    secret: str
    expires_at: str | None = None  # ISO 8601; brokers refuse signatures after it


@dataclass(frozen=True, slots=True)
class AclSpec:
    namespace: str
    policy_id: str
    principal: str
    resource_type: str
    resource_pattern: str
    resource_name: str
    actions: tuple[str, ...]
    source_cidrs: tuple[str, ...]
    decision: str


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    namespace: str
    scope: str  # "tenant", "topic" or "group"
    name: str  # qualified topic/group name, empty for the tenant
    limits: Mapping[str, int] = field(default_factory=dict)


class BrokerGateway(Protocol):
    """Admin operations on one broker node, addressed by its gRPC endpoint."""

    def upsert_topic(self, endpoint: str, spec: TopicSpec) -> None: ...
    def delete_topic(self, endpoint: str, name: str) -> None: ...
    def list_topics(self, endpoint: str) -> Mapping[str, TopicSpec]: ...
    def upsert_group(self, endpoint: str, spec: GroupSpec) -> None: ...
    def delete_group(self, endpoint: str, name: str) -> None: ...
    def list_groups(self, endpoint: str) -> Mapping[str, GroupSpec]: ...
    def put_access_key(self, endpoint: str, spec: AccessKeySpec) -> None: ...
    def delete_access_key(self, endpoint: str, namespace: str, access_key: str) -> None: ...
    def put_acl(self, endpoint: str, spec: AclSpec) -> None: ...
    def delete_acl(self, endpoint: str, namespace: str, policy_id: str) -> None: ...
    def put_quota(self, endpoint: str, spec: QuotaSpec) -> None: ...
    def delete_quota(self, endpoint: str, namespace: str, scope: str, name: str) -> None: ...


@final
class InMemoryBrokerGateway:
    """Brokers as dicts; ``down`` endpoints raise BrokerUnavailable, ``wipe`` simulates a rebuild."""

    def __init__(self) -> None:
        self.topics: dict[str, dict[str, TopicSpec]] = {}
        self.groups: dict[str, dict[str, GroupSpec]] = {}
        self.access_keys: dict[str, dict[str, AccessKeySpec]] = {}
        self.acls: dict[str, dict[str, AclSpec]] = {}
        self.quotas: dict[str, dict[tuple[str, str, str], QuotaSpec]] = {}
        self.down: set[str] = set()
        self.calls: list[tuple[str, str]] = []

    def _check(self, endpoint: str, op: str) -> None:
        self.calls.append((op, endpoint))
        if endpoint in self.down:
            raise BrokerUnavailable(f"broker {endpoint} is unreachable")

    def wipe(self, endpoint: str) -> None:
        for store in (self.topics, self.groups, self.access_keys, self.acls, self.quotas):
            store.pop(endpoint, None)

    def upsert_topic(self, endpoint: str, spec: TopicSpec) -> None:
        self._check(endpoint, "upsert_topic")
        self.topics.setdefault(endpoint, {})[spec.name] = spec

    def delete_topic(self, endpoint: str, name: str) -> None:
        self._check(endpoint, "delete_topic")
        self.topics.get(endpoint, {}).pop(name, None)

    def list_topics(self, endpoint: str) -> Mapping[str, TopicSpec]:
        self._check(endpoint, "list_topics")
        return dict(self.topics.get(endpoint, {}))

    def upsert_group(self, endpoint: str, spec: GroupSpec) -> None:
        self._check(endpoint, "upsert_group")
        self.groups.setdefault(endpoint, {})[spec.name] = spec

    def delete_group(self, endpoint: str, name: str) -> None:
        self._check(endpoint, "delete_group")
        self.groups.get(endpoint, {}).pop(name, None)

    def list_groups(self, endpoint: str) -> Mapping[str, GroupSpec]:
        self._check(endpoint, "list_groups")
        return dict(self.groups.get(endpoint, {}))

    def put_access_key(self, endpoint: str, spec: AccessKeySpec) -> None:
        self._check(endpoint, "put_access_key")
        self.access_keys.setdefault(endpoint, {})[spec.access_key] = spec

    def delete_access_key(self, endpoint: str, namespace: str, access_key: str) -> None:
        self._check(endpoint, "delete_access_key")
        self.access_keys.get(endpoint, {}).pop(access_key, None)

    def put_acl(self, endpoint: str, spec: AclSpec) -> None:
        self._check(endpoint, "put_acl")
        self.acls.setdefault(endpoint, {})[spec.policy_id] = spec

    def delete_acl(self, endpoint: str, namespace: str, policy_id: str) -> None:
        self._check(endpoint, "delete_acl")
        self.acls.get(endpoint, {}).pop(policy_id, None)

    def put_quota(self, endpoint: str, spec: QuotaSpec) -> None:
        self._check(endpoint, "put_quota")
        self.quotas.setdefault(endpoint, {})[(spec.namespace, spec.scope, spec.name)] = spec

    def delete_quota(self, endpoint: str, namespace: str, scope: str, name: str) -> None:
        self._check(endpoint, "delete_quota")
        self.quotas.get(endpoint, {}).pop((namespace, scope, name), None)


def _qualified(info: Any) -> str:
    name = str(info.name)
    return name if "%" in name or not info.namespace else f"{info.namespace}%{name}"


@final
class GrpcBrokerGateway:
    """The real brokers, through ``mqcloud.admin_client.BrokerAdminClient`` (one client per endpoint).

    The admin API (``mqcloud.admin.v1.BrokerAdmin``) serves topics and groups; upserts are create,
    then update on ALREADY_EXISTS; deletes accept NOT_FOUND. Keys, ACLs and quotas are pushed when
    the client offers a matching call and are otherwise skipped with a debug log, so a broker without
    those calls still gets its topics and groups.
    """

    def __init__(self, timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s
        self._clients: dict[str, Any] = {}

    def _client(self, endpoint: str) -> Any:
        client = self._clients.get(endpoint)
        if client is None:
            from mqcloud.admin_client import BrokerAdminClient

            client = BrokerAdminClient(endpoint, timeout=self.timeout_s)
            self._clients[endpoint] = client
        return client

    def _call(self, endpoint: str, method: str, *args: Any, ok: tuple[str, ...] = (), **kwargs: Any) -> Any:
        from mqcloud.admin_client import BrokerAdminError

        try:
            return getattr(self._client(endpoint), method)(*args, **kwargs)
        except BrokerAdminError as exc:
            if exc.code in ok:
                return None
            raise BrokerUnavailable(f"{endpoint}: {method} failed: {exc}") from exc

    def _optional(self, endpoint: str, method: str, *args: Any, **kwargs: Any) -> None:
        if getattr(self._client(endpoint), method, None) is None:
            logger.debug("broker admin client has no %s; skipped", method, extra={"endpoint": endpoint})
            return
        self._call(endpoint, method, *args, **kwargs)

    def upsert_topic(self, endpoint: str, spec: TopicSpec) -> None:
        fields: dict[str, Any] = {
            "queue_count": spec.queue_count,
            "message_type": spec.message_type,
            "retention_hours": spec.retention_hours or 0,
            "max_message_bytes": spec.max_message_bytes or 0,
        }
        created = self._call(endpoint, "create_topic", spec.name, ok=("ALREADY_EXISTS",), **fields)
        if created is None:
            self._call(endpoint, "update_topic", spec.name, **fields)

    def delete_topic(self, endpoint: str, name: str) -> None:
        self._call(endpoint, "delete_topic", name, ok=("NOT_FOUND",))

    def list_topics(self, endpoint: str) -> Mapping[str, TopicSpec]:
        from mqcloud.admin.v1 import admin_pb2

        result: dict[str, TopicSpec] = {}
        for info in self._call(endpoint, "list_topics") or ():
            name = _qualified(info)
            result[name] = TopicSpec(
                name=name,
                queue_count=int(info.queue_count),
                message_type=admin_pb2.TopicMessageType.Name(info.message_type),
                retention_hours=int(info.retention_hours) or None,
                max_message_bytes=int(info.max_message_bytes) or None,
            )
        return result

    def upsert_group(self, endpoint: str, spec: GroupSpec) -> None:
        fields: dict[str, Any] = {
            "fifo": spec.fifo,
            "broadcast": spec.broadcast,
            "max_delivery_attempts": spec.max_delivery_attempts,
            "retry_initial_ms": spec.retry_initial_backoff_ms,
            "retry_max_ms": spec.retry_max_backoff_ms,
        }
        if spec.retry_policy == "CUSTOMIZED":
            # fixed steps from the initial backoff doubling up to the max, as RocketMQ's default table
            steps: list[int] = []
            delay = spec.retry_initial_backoff_ms
            while delay < spec.retry_max_backoff_ms and len(steps) < spec.max_delivery_attempts:
                steps.append(delay)
                delay *= 2
            fields["retry_delays_ms"] = [*steps, spec.retry_max_backoff_ms]
        created = self._call(endpoint, "create_group", spec.name, ok=("ALREADY_EXISTS",), **fields)
        if created is None:
            self._call(endpoint, "update_group", spec.name, **fields)

    def delete_group(self, endpoint: str, name: str) -> None:
        self._call(endpoint, "delete_group", name, ok=("NOT_FOUND",))

    def list_groups(self, endpoint: str) -> Mapping[str, GroupSpec]:
        result: dict[str, GroupSpec] = {}
        for info in self._call(endpoint, "list_groups") or ():
            name = _qualified(info)
            result[name] = GroupSpec(
                name=name,
                fifo=bool(info.fifo),
                broadcast=bool(info.broadcast),
                max_delivery_attempts=int(info.max_delivery_attempts),
            )
        return result

    def put_access_key(self, endpoint: str, spec: AccessKeySpec) -> None:
        self._optional(endpoint, "put_access_key", **asdict(spec))

    def delete_access_key(self, endpoint: str, namespace: str, access_key: str) -> None:
        self._optional(endpoint, "delete_access_key", namespace, access_key)

    def put_acl(self, endpoint: str, spec: AclSpec) -> None:
        self._optional(endpoint, "put_acl", **asdict(spec))

    def delete_acl(self, endpoint: str, namespace: str, policy_id: str) -> None:
        self._optional(endpoint, "delete_acl", namespace, policy_id)

    def put_quota(self, endpoint: str, spec: QuotaSpec) -> None:
        self._optional(endpoint, "put_quota", **asdict(spec))

    def delete_quota(self, endpoint: str, namespace: str, scope: str, name: str) -> None:
        self._optional(endpoint, "delete_quota", namespace, scope, name)
