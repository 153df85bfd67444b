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


@final
class GrpcBrokerGateway:
    """The real brokers, through ``mqcloud.admin_client.BrokerAdminClient`` (one client per endpoint).

    The admin API serves topics and groups; keys, ACLs and quotas are pushed through it when the
    client offers the matching call, and are otherwise skipped with a debug log (the broker then gets
    them another way, e.g. its own config file), so a broker without them still provisions topics.
    """

    def __init__(self, timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s
        self._clients: dict[str, Any] = {}

    def _client(self, endpoint: str) -> Any:
        client = self._clients.get(endpoint)
        if client is None:
            try:
                from mqcloud.admin_client import BrokerAdminClient  # type: ignore[import-not-found]
            except ImportError as exc:  # the admin client is not installed in this build
                raise BrokerUnavailable(f"broker admin client unavailable: {exc}") from exc
            client = BrokerAdminClient(endpoint, timeout=self.timeout_s)
            self._clients[endpoint] = client
        return client

    def _call(self, endpoint: str, method: str, *args: Any, optional: bool = False, **kwargs: Any) -> Any:
        client = self._client(endpoint)
        fn = getattr(client, method, None)
        if fn is None:
            if optional:
                logger.debug("broker admin client has no %s; skipped", method, extra={"endpoint": endpoint})
                return None
            raise BrokerUnavailable(f"broker admin client does not support {method}")
        try:
            return fn(*args, **kwargs)
        except BrokerUnavailable:
            raise
        except Exception as exc:  # grpc.RpcError and client errors alike: the broker did not comply
            raise BrokerUnavailable(f"{endpoint}: {method} failed: {exc}") from exc

    def upsert_topic(self, endpoint: str, spec: TopicSpec) -> None:
        self._call(endpoint, "upsert_topic", **asdict(spec))

    def delete_topic(self, endpoint: str, name: str) -> None:
        self._call(endpoint, "delete_topic", name)

    def list_topics(self, endpoint: str) -> Mapping[str, TopicSpec]:
        result: dict[str, TopicSpec] = {}
        for info in self._call(endpoint, "list_topics") or ():
            result[info.name] = TopicSpec(
                name=info.name,
                queue_count=int(getattr(info, "queue_count", 0)),
                message_type=str(getattr(info, "message_type", "NORMAL")),
            )
        return result

    def upsert_group(self, endpoint: str, spec: GroupSpec) -> None:
        self._call(endpoint, "upsert_group", **asdict(spec))

    def delete_group(self, endpoint: str, name: str) -> None:
        self._call(endpoint, "delete_group", name)

    def list_groups(self, endpoint: str) -> Mapping[str, GroupSpec]:
        result: dict[str, GroupSpec] = {}
        for info in self._call(endpoint, "list_groups") or ():
            result[info.name] = GroupSpec(
                name=info.name,
                fifo=bool(getattr(info, "fifo", False)),
                broadcast=bool(getattr(info, "broadcast", False)),
                max_delivery_attempts=int(getattr(info, "max_delivery_attempts", 16)),
            )
        return result

    def put_access_key(self, endpoint: str, spec: AccessKeySpec) -> None:
        self._call(endpoint, "put_access_key", **asdict(spec), optional=True)

    def delete_access_key(self, endpoint: str, namespace: str, access_key: str) -> None:
        self._call(endpoint, "delete_access_key", namespace, access_key, optional=True)

    def put_acl(self, endpoint: str, spec: AclSpec) -> None:
        self._call(endpoint, "put_acl", **asdict(spec), optional=True)

    def delete_acl(self, endpoint: str, namespace: str, policy_id: str) -> None:
        self._call(endpoint, "delete_acl", namespace, policy_id, optional=True)

    def put_quota(self, endpoint: str, spec: QuotaSpec) -> None:
        self._call(endpoint, "put_quota", **asdict(spec), optional=True)

    def delete_quota(self, endpoint: str, namespace: str, scope: str, name: str) -> None:
        self._call(endpoint, "delete_quota", namespace, scope, name, optional=True)
