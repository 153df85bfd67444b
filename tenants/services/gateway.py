"""The seam between provisioning and brokers: what the control plane needs from a broker's admin API.

``BrokerGateway`` is the interface; ``GrpcBrokerGateway`` talks to real brokers through
``mqcloud.admin_client.BrokerAdminClient``; ``InMemoryBrokerGateway`` is a faithful fake for tests
and for running the control plane without brokers. Every call is idempotent: upserts replace,
deletes of missing objects succeed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, final

from tenants.errors import BrokerUnavailable
from tenants.services.gateway_views import DataPlaneViews, GrpcDataPlaneViews, InMemoryDataPlaneViews

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
    """A key as brokers hold it: the plain secret (brokers verify HMAC signatures with it)."""

    namespace: str
    access_key: str
    secret: str = field(repr=False)
    expires_at_ms: int = 0  # brokers refuse signatures from then on; 0: never
    status: str = "active"  # what a broker reports; the control plane only pushes usable keys
    # What brokers list instead of the secret (mqcloud.admin_client.secret_fingerprint).
    fingerprint: str = ""

    def secret_fingerprint(self) -> str:
        from mqcloud.admin_client import secret_fingerprint

        return self.fingerprint or secret_fingerprint(self.access_key, self.secret)

    def matches(self, actual: AccessKeySpec) -> bool:
        """Whether a broker's copy is this key (secrets compared by fingerprint)."""
        return (self.namespace, self.expires_at_ms, self.status) == (
            actual.namespace,
            actual.expires_at_ms,
            actual.status,
        ) and self.secret_fingerprint() == actual.secret_fingerprint()


@dataclass(frozen=True, slots=True)
class AclSpec:
    """An ACL 2.0 policy; ``resource_pattern`` is LITERAL/PREFIXED and ``resource_name`` is
    tenant-relative ("" for every name), as on ``AclPolicy``."""

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
    """Limits of a tenant (all of them) or of one topic/group (only those it overrides)."""

    namespace: str
    scope: str  # "tenant", "topic" or "group"
    name: str  # qualified topic/group name, empty for the tenant
    limits: Mapping[str, int] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.scope, self.name)


class BrokerGateway(DataPlaneViews, Protocol):
    """Admin operations on one broker node, addressed by its gRPC endpoint."""

    def upsert_topic(self, endpoint: str, spec: TopicSpec) -> None: ...
    def delete_topic(self, endpoint: str, name: str) -> None: ...
    def list_topics(self, endpoint: str) -> Mapping[str, TopicSpec]: ...
    def upsert_group(self, endpoint: str, spec: GroupSpec) -> None: ...
    def delete_group(self, endpoint: str, name: str) -> None: ...
    def list_groups(self, endpoint: str) -> Mapping[str, GroupSpec]: ...
    def put_access_key(self, endpoint: str, spec: AccessKeySpec) -> None: ...
    def delete_access_key(self, endpoint: str, namespace: str, access_key: str) -> None: ...
    def list_access_keys(self, endpoint: str) -> Mapping[str, AccessKeySpec]: ...
    def put_acl(self, endpoint: str, spec: AclSpec) -> None: ...
    def delete_acl(self, endpoint: str, namespace: str, policy_id: str) -> None: ...
    def list_acls(self, endpoint: str) -> Mapping[tuple[str, str], AclSpec]: ...
    def put_quota(self, endpoint: str, spec: QuotaSpec) -> None: ...
    def delete_quota(self, endpoint: str, namespace: str, scope: str, name: str) -> None: ...
    def list_quotas(self, endpoint: str) -> Mapping[tuple[str, str, str], QuotaSpec]: ...


@final
class InMemoryBrokerGateway(InMemoryDataPlaneViews):
    """Brokers as dicts; ``down`` endpoints raise BrokerUnavailable, ``wipe`` simulates a rebuild."""

    def __init__(self) -> None:
        self.topics: dict[str, dict[str, TopicSpec]] = {}
        self.groups: dict[str, dict[str, GroupSpec]] = {}
        self.access_keys: dict[str, dict[str, AccessKeySpec]] = {}
        self.acls: dict[str, dict[tuple[str, str], AclSpec]] = {}
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

    def list_access_keys(self, endpoint: str) -> Mapping[str, AccessKeySpec]:
        self._check(endpoint, "list_access_keys")
        return dict(self.access_keys.get(endpoint, {}))

    def put_acl(self, endpoint: str, spec: AclSpec) -> None:
        self._check(endpoint, "put_acl")
        self.acls.setdefault(endpoint, {})[(spec.namespace, spec.policy_id)] = spec

    def delete_acl(self, endpoint: str, namespace: str, policy_id: str) -> None:
        self._check(endpoint, "delete_acl")
        self.acls.get(endpoint, {}).pop((namespace, policy_id), None)

    def list_acls(self, endpoint: str) -> Mapping[tuple[str, str], AclSpec]:
        self._check(endpoint, "list_acls")
        return dict(self.acls.get(endpoint, {}))

    def put_quota(self, endpoint: str, spec: QuotaSpec) -> None:
        self._check(endpoint, "put_quota")
        self.quotas.setdefault(endpoint, {})[spec.key] = spec

    def delete_quota(self, endpoint: str, namespace: str, scope: str, name: str) -> None:
        self._check(endpoint, "delete_quota")
        self.quotas.get(endpoint, {}).pop((namespace, scope, name), None)

    def list_quotas(self, endpoint: str) -> Mapping[tuple[str, str, str], QuotaSpec]:
        self._check(endpoint, "list_quotas")
        return dict(self.quotas.get(endpoint, {}))


def _qualified(info: Any) -> str:
    name = str(info.name)
    return name if "%" in name or not info.namespace else f"{info.namespace}%{name}"


@final
class GrpcBrokerGateway(GrpcDataPlaneViews):
    """The real brokers, through ``mqcloud.admin_client.BrokerAdminClient`` (one client per endpoint).

    Topic and group upserts are create, then update on ALREADY_EXISTS; keys, ACLs and quotas have
    real upserts (Put*). Deletes accept NOT_FOUND. Any other admin error becomes BrokerUnavailable
    with the broker's message, which provisioning records on the row.
    """

    def __init__(
        self, timeout_s: float = 5.0, token: str | None = None, root_certificates: bytes | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self._clients: dict[str, Any] = {}
        if token is None:  # the operator credential brokers require (MQ_BROKER_ADMIN_TOKEN)
            from django.conf import settings

            token = getattr(settings, "BROKER_ADMIN_TOKEN", None)
            ca_file = getattr(settings, "BROKER_TLS_CA_FILE", None)
            if root_certificates is None and ca_file:
                root_certificates = Path(ca_file).read_bytes()
        self._token = token
        self._root_certificates = root_certificates

    def _client(self, endpoint: str) -> Any:
        client = self._clients.get(endpoint)
        if client is None:
            from mqcloud.admin_client import BrokerAdminClient

            client = BrokerAdminClient(
                endpoint, timeout=self.timeout_s, token=self._token, root_certificates=self._root_certificates
            )
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

    def upsert_topic(self, endpoint: str, spec: TopicSpec) -> None:
        fields: dict[str, Any] = {
            "queue_count": spec.queue_count,
            "message_type": spec.message_type,
            "retention_hours": spec.retention_hours or 0,
            "max_message_bytes": spec.max_message_bytes or 0,
            "tiered_retention_hours": spec.tiered_retention_hours or 0,
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
                tiered_retention_hours=int(info.tiered_retention_hours) or None,
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
        self._call(
            endpoint,
            "put_access_key",
            spec.access_key,
            secret_key=spec.secret,
            namespace=spec.namespace,
            status=spec.status,
            expires_at_ms=spec.expires_at_ms,
        )

    def delete_access_key(self, endpoint: str, namespace: str, access_key: str) -> None:
        self._call(endpoint, "delete_access_key", access_key, namespace, ok=("NOT_FOUND",))

    def list_access_keys(self, endpoint: str) -> Mapping[str, AccessKeySpec]:
        from mqcloud.admin.v1 import admin_pb2

        return {
            k.access_key: AccessKeySpec(
                namespace=k.namespace,
                access_key=k.access_key,
                secret=k.secret_key,
                fingerprint=k.secret_fingerprint,
                expires_at_ms=int(k.expires_at_ms),
                status=admin_pb2.AccessKeyStatus.Name(k.status).removeprefix("ACCESS_KEY_STATUS_").lower(),
            )
            for k in self._call(endpoint, "list_access_keys") or ()
        }

    def put_acl(self, endpoint: str, spec: AclSpec) -> None:
        self._call(
            endpoint,
            "put_acl",
            spec.policy_id,
            namespace=spec.namespace,
            principal=spec.principal,
            resource_type=spec.resource_type,
            resource_pattern=spec.resource_name,
            pattern_type=spec.resource_pattern,
            actions=spec.actions,
            source_cidrs=spec.source_cidrs,
            decision=spec.decision,
        )

    def delete_acl(self, endpoint: str, namespace: str, policy_id: str) -> None:
        self._call(endpoint, "delete_acl", namespace, policy_id, ok=("NOT_FOUND",))

    def list_acls(self, endpoint: str) -> Mapping[tuple[str, str], AclSpec]:
        from mqcloud.admin.v1 import admin_pb2 as a

        def name(enum: Any, prefix: str, value: int) -> str:
            return str(enum.Name(value)).removeprefix(prefix)

        result: dict[tuple[str, str], AclSpec] = {}
        for p in self._call(endpoint, "list_acls") or ():
            result[(p.namespace, p.name)] = AclSpec(
                namespace=p.namespace,
                policy_id=p.name,
                principal=p.principal,
                # wire names are upper case; the control plane's choices are "Topic", "Pub", "Allow"
                resource_type=name(a.AclResourceType, "ACL_RESOURCE_TYPE_", p.resource_type).title(),
                resource_pattern=name(a.AclPatternType, "ACL_PATTERN_TYPE_", p.pattern_type),
                resource_name=p.resource_pattern,
                actions=tuple(name(a.AclAction, "ACL_ACTION_", x).title() for x in p.actions),
                source_cidrs=tuple(p.source_cidrs),
                decision=name(a.AclDecision, "ACL_DECISION_", p.decision).title(),
            )
        return result

    def put_quota(self, endpoint: str, spec: QuotaSpec) -> None:
        topic, group = _quota_scope(spec.scope, spec.name)
        self._call(endpoint, "put_quota", spec.namespace, dict(spec.limits), topic=topic, group=group)

    def delete_quota(self, endpoint: str, namespace: str, scope: str, name: str) -> None:
        topic, group = _quota_scope(scope, name)
        self._call(endpoint, "delete_quota", namespace, ok=("NOT_FOUND",), topic=topic, group=group)

    def list_quotas(self, endpoint: str) -> Mapping[tuple[str, str, str], QuotaSpec]:
        from mqcloud.admin_client import quota_limits

        result: dict[tuple[str, str, str], QuotaSpec] = {}
        for q in self._call(endpoint, "list_quotas") or ():
            scope, name = ("topic", q.topic) if q.topic else ("group", q.group) if q.group else ("tenant", "")
            spec = QuotaSpec(q.namespace, scope, name, quota_limits(q))
            result[spec.key] = spec
        return result


def _quota_scope(scope: str, name: str) -> tuple[str, str]:
    """(topic, group) of a QuotaSpec scope."""
    return (name if scope == "topic" else "", name if scope == "group" else "")
