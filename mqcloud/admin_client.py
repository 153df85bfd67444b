"""A thin client of a broker's admin API (``mqcloud.admin.v1.BrokerAdmin``).

Used by ``mqctl admin`` and the control plane. grpcio + protobuf only. Errors surface as
:class:`BrokerAdminError` carrying the gRPC status code name (NOT_FOUND, ALREADY_EXISTS, ...).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, cast

import grpc
from google.protobuf import json_format

from mqcloud.admin.v1 import admin_pb2 as a
from mqcloud.admin.v1 import admin_pb2_grpc

__all__ = (
    "QUOTA_LIMITS",
    "BrokerAdminClient",
    "BrokerAdminError",
    "admin_channel",
    "operator_metadata",
    "quota_limits",
    "secret_fingerprint",
    "to_dict",
)

MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
# The limits of the admin API's Quota message; the control plane's Plan/Quota fields and the broker's
# security store use the same names.
QUOTA_LIMITS = (
    "produce_messages_per_s",
    "produce_bytes_per_s",
    "consume_messages_per_s",
    "consume_bytes_per_s",
    "storage_bytes",
    "max_topics",
    "max_groups",
    "max_message_bytes",
    "max_connections",
)


class BrokerAdminError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def secret_fingerprint(access_key: str, secret: str) -> str:
    """What brokers list instead of a secret: hex SHA-256 of ``"{access_key}:{secret}"``."""
    return hashlib.sha256(f"{access_key}:{secret}".encode()).hexdigest()


def to_dict(message: Any) -> dict[str, Any]:
    """A response as a plain dict (field names as in the proto, defaults included)."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def _retry_policy(
    retry_initial_ms: int | None,
    retry_max_ms: int | None,
    retry_multiplier: float | None,
    retry_delays_ms: list[int] | None,
) -> a.RetryPolicy | None:
    if retry_delays_ms:
        return a.RetryPolicy(customized=a.CustomizedRetry(delays_ms=retry_delays_ms))
    if retry_initial_ms is not None or retry_max_ms is not None or retry_multiplier is not None:
        return a.RetryPolicy(
            exponential=a.ExponentialRetry(
                initial_ms=retry_initial_ms or 1000,
                max_ms=retry_max_ms or 7_200_000,
                multiplier=retry_multiplier or 2.0,
            )
        )
    return None


def _enum(pb_enum: Any, prefix: str, value: str) -> Any:
    """``"Pub"`` / ``"PUB"`` -> ``ACL_ACTION_PUB``; an unknown name raises ValueError."""
    return pb_enum.Value(prefix + value.upper())


def admin_channel(target: str, *, tls: bool = False, root_certificates: bytes | None = None) -> grpc.Channel:
    """A channel to a broker's admin API: TLS when ``tls`` or ``root_certificates`` (PEM) is given."""
    if tls or root_certificates is not None:
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=root_certificates))
    return grpc.insecure_channel(target)


def operator_metadata(token: str | None) -> tuple[tuple[str, str], ...] | None:
    """The call metadata that carries the broker's operator token (``authorization: Bearer``)."""
    return (("authorization", f"Bearer {token}"),) if token else None


class BrokerAdminClient:
    """``BrokerAdminClient("127.0.0.1:8081").create_topic("ns%orders", queue_count=8)``.

    ``token`` is the broker's operator credential (sent as ``authorization: Bearer``); ``tls`` or
    ``root_certificates`` (PEM) connect over TLS.
    """

    def __init__(
        self,
        target: str,
        *,
        timeout: float = 10.0,
        channel: grpc.Channel | None = None,
        token: str | None = None,
        tls: bool = False,
        root_certificates: bytes | None = None,
    ) -> None:
        self._channel = channel or admin_channel(target, tls=tls, root_certificates=root_certificates)
        self._stub = admin_pb2_grpc.BrokerAdminStub(self._channel)
        self._timeout = timeout
        self._metadata = operator_metadata(token)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> BrokerAdminClient:
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

    # Topics

    def create_topic(
        self,
        name: str,
        *,
        queue_count: int = 8,
        message_type: str = "NORMAL",
        retention_hours: int = 0,
        max_message_bytes: int = 0,
        namespace: str = "",
        tiered_retention_hours: int = 0,
    ) -> a.Topic:
        topic = a.Topic(
            name=name,
            queue_count=queue_count,
            message_type=a.TopicMessageType.Value(message_type.upper()),  # type: ignore[arg-type]
            retention_hours=retention_hours,
            max_message_bytes=max_message_bytes,
            namespace=namespace,
            tiered_retention_hours=tiered_retention_hours,
        )
        return cast(a.Topic, self._call("CreateTopic", a.CreateTopicRequest(topic=topic)).topic)

    def update_topic(
        self,
        name: str,
        *,
        queue_count: int | None = None,
        message_type: str | None = None,
        retention_hours: int | None = None,
        max_message_bytes: int | None = None,
        tiered_retention_hours: int | None = None,
    ) -> a.Topic:
        request = a.UpdateTopicRequest(name=name)
        if queue_count is not None:
            request.queue_count = queue_count
        if message_type is not None:
            request.message_type = a.TopicMessageType.Value(message_type.upper())  # type: ignore[assignment]
        if retention_hours is not None:
            request.retention_hours = retention_hours
        if max_message_bytes is not None:
            request.max_message_bytes = max_message_bytes
        if tiered_retention_hours is not None:
            request.tiered_retention_hours = tiered_retention_hours
        return cast(a.Topic, self._call("UpdateTopic", request).topic)

    def delete_topic(self, name: str) -> None:
        self._call("DeleteTopic", a.DeleteTopicRequest(name=name))

    def get_topic(self, name: str) -> a.Topic:
        return cast(a.Topic, self._call("GetTopic", a.GetTopicRequest(name=name)).topic)

    def list_topics(self, namespace: str = "") -> list[a.Topic]:
        return list(self._call("ListTopics", a.ListTopicsRequest(namespace=namespace)).topics)

    def topic_stats(self, name: str) -> a.GetTopicStatsResponse:
        return cast(a.GetTopicStatsResponse, self._call("GetTopicStats", a.GetTopicStatsRequest(name=name)))

    # Groups

    def create_group(
        self,
        name: str,
        *,
        fifo: bool = False,
        max_delivery_attempts: int = 0,
        broadcast: bool = False,
        namespace: str = "",
        retry_initial_ms: int | None = None,
        retry_max_ms: int | None = None,
        retry_multiplier: float | None = None,
        retry_delays_ms: list[int] | None = None,
    ) -> a.Group:
        group = a.Group(
            name=name,
            fifo=fifo,
            max_delivery_attempts=max_delivery_attempts,
            broadcast=broadcast,
            namespace=namespace,
        )
        policy = _retry_policy(retry_initial_ms, retry_max_ms, retry_multiplier, retry_delays_ms)
        if policy is not None:
            group.retry_policy.CopyFrom(policy)
        return cast(a.Group, self._call("CreateGroup", a.CreateGroupRequest(group=group)).group)

    def update_group(
        self,
        name: str,
        *,
        fifo: bool | None = None,
        max_delivery_attempts: int | None = None,
        broadcast: bool | None = None,
        retry_initial_ms: int | None = None,
        retry_max_ms: int | None = None,
        retry_multiplier: float | None = None,
        retry_delays_ms: list[int] | None = None,
    ) -> a.Group:
        request = a.UpdateGroupRequest(name=name)
        if fifo is not None:
            request.fifo = fifo
        if max_delivery_attempts is not None:
            request.max_delivery_attempts = max_delivery_attempts
        if broadcast is not None:
            request.broadcast = broadcast
        policy = _retry_policy(retry_initial_ms, retry_max_ms, retry_multiplier, retry_delays_ms)
        if policy is not None:
            request.retry_policy.CopyFrom(policy)
        return cast(a.Group, self._call("UpdateGroup", request).group)

    def delete_group(self, name: str) -> None:
        self._call("DeleteGroup", a.DeleteGroupRequest(name=name))

    def get_group(self, name: str) -> a.Group:
        return cast(a.Group, self._call("GetGroup", a.GetGroupRequest(name=name)).group)

    def list_groups(self, namespace: str = "") -> list[a.Group]:
        return list(self._call("ListGroups", a.ListGroupsRequest(namespace=namespace)).groups)

    def group_stats(self, group: str, topic: str = "") -> a.GetGroupStatsResponse:
        return cast(
            a.GetGroupStatsResponse,
            self._call("GetGroupStats", a.GetGroupStatsRequest(group=group, topic=topic)),
        )

    # Clients

    def list_clients(self, namespace: str = "", group: str = "") -> list[a.ClientInfo]:
        return list(self._call("ListClients", a.ListClientsRequest(namespace=namespace, group=group)).clients)

    # Access keys (the secret travels in clear to the broker: use TLS or a private network)

    def put_access_key(
        self,
        access_key: str,
        *,
        secret_key: str,
        namespace: str,
        status: str = "ACTIVE",
        expires_at_ms: int = 0,
    ) -> a.AccessKey:
        """Create or replace a key (idempotent)."""
        key = a.AccessKey(
            access_key=access_key,
            secret_key=secret_key,
            namespace=namespace,
            status=_enum(a.AccessKeyStatus, "ACCESS_KEY_STATUS_", status),
            expires_at_ms=expires_at_ms,
        )
        return cast(a.AccessKey, self._call("PutAccessKey", a.PutAccessKeyRequest(access_key=key)).access_key)

    def delete_access_key(self, access_key: str, namespace: str = "") -> None:
        self._call("DeleteAccessKey", a.DeleteAccessKeyRequest(access_key=access_key, namespace=namespace))

    def list_access_keys(self, namespace: str = "", *, include_secrets: bool = False) -> list[a.AccessKey]:
        """Keys with ``secret_fingerprint``; ``secret_key`` only with ``include_secrets`` and a token."""
        request = a.ListAccessKeysRequest(namespace=namespace, include_secrets=include_secrets)
        return list(self._call("ListAccessKeys", request).access_keys)

    # ACL policies

    def put_acl(
        self,
        name: str,
        *,
        namespace: str,
        principal: str,
        resource_type: str,
        actions: Iterable[str],
        resource_pattern: str = "",
        pattern_type: str = "LITERAL",
        source_cidrs: Iterable[str] = (),
        decision: str = "ALLOW",
    ) -> a.AclPolicy:
        """Create or replace the policy ``name`` of ``namespace``; enum values by name, any case."""
        policy = a.AclPolicy(
            name=name,
            namespace=namespace,
            principal=principal,
            resource_type=_enum(a.AclResourceType, "ACL_RESOURCE_TYPE_", resource_type),
            resource_pattern=resource_pattern,
            pattern_type=_enum(a.AclPatternType, "ACL_PATTERN_TYPE_", pattern_type),
            actions=[_enum(a.AclAction, "ACL_ACTION_", x) for x in actions],
            source_cidrs=list(source_cidrs),
            decision=_enum(a.AclDecision, "ACL_DECISION_", decision),
        )
        return cast(a.AclPolicy, self._call("PutAcl", a.PutAclRequest(policy=policy)).policy)

    def delete_acl(self, namespace: str, name: str) -> None:
        self._call("DeleteAcl", a.DeleteAclRequest(namespace=namespace, name=name))

    def list_acls(self, namespace: str = "") -> list[a.AclPolicy]:
        return list(self._call("ListAcls", a.ListAclsRequest(namespace=namespace)).policies)

    # Quotas

    def put_quota(
        self, namespace: str, limits: Mapping[str, int], *, topic: str = "", group: str = ""
    ) -> a.Quota:
        """Replace the quota of the namespace, or of one of its topics or groups (``limits`` by
        ``QUOTA_LIMITS`` name; a limit left out is unlimited, or inherited for a topic/group)."""
        unknown = set(limits) - set(QUOTA_LIMITS)
        if unknown:
            raise ValueError(f"unknown quota limits {sorted(unknown)}")
        quota = a.Quota(
            namespace=namespace, topic=topic, group=group, **{k: int(v) for k, v in limits.items()}
        )
        return cast(a.Quota, self._call("PutQuota", a.PutQuotaRequest(quota=quota)).quota)

    def delete_quota(self, namespace: str, *, topic: str = "", group: str = "") -> None:
        self._call("DeleteQuota", a.DeleteQuotaRequest(namespace=namespace, topic=topic, group=group))

    def list_quotas(self, namespace: str = "") -> list[a.Quota]:
        return list(self._call("ListQuotas", a.ListQuotasRequest(namespace=namespace)).quotas)


def quota_limits(quota: a.Quota) -> dict[str, int]:
    """The limits a Quota message sets (absent ones are not in the dict)."""
    return {name: int(getattr(quota, name)) for name in QUOTA_LIMITS if quota.HasField(name)}
