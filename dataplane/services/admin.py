"""mqcloud.admin.v1.BrokerAdmin: topic/group CRUD, statistics, connected clients, and the access keys,
ACL policies and quotas the control plane pushes (stored in ``dataplane.security_store``)."""

from __future__ import annotations

import enum
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from dataplane.broker import Broker
from dataplane.metadata import GroupConfig, MetadataError, TopicConfig, TopicType, qualified_name
from dataplane.names import split
from dataplane.security_store import (
    QUOTA_LIMITS,
    AccessKeyConfig,
    AccessKeyStatus,
    AclAction,
    AclConfig,
    AclDecision,
    AclPatternType,
    AclResourceType,
    QuotaConfig,
    SecurityConfigError,
)
from mqcloud.admin.v1 import admin_pb2 as a
from mqcloud.admin.v1 import admin_pb2_grpc
from mqcloud.admin_client import secret_fingerprint
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = ("BrokerAdminServicer",)

logger = logging.getLogger(__name__)

_GRPC_CODES = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "exists": grpc.StatusCode.ALREADY_EXISTS,
}


def _guard(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """MetadataError -> gRPC status (the admin API's one error boundary)."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await handler(self, request, context)
        except (MetadataError, SecurityConfigError) as exc:
            await context.abort(_GRPC_CODES[exc.kind], exc.message)

    return wrapper


def _topic_pb(t: TopicConfig) -> a.Topic:
    return a.Topic(
        name=t.name,
        queue_count=t.queue_count,
        message_type=a.TopicMessageType.Value(t.message_type.value),  # type: ignore[arg-type]
        retention_hours=t.retention_hours,
        max_message_bytes=t.max_message_bytes,
        tiered_retention_hours=t.tiered_retention_hours,
        namespace=t.namespace,
        create_time_ms=t.create_time_ms,
        update_time_ms=t.update_time_ms,
    )


def _retry_dict(policy: a.RetryPolicy) -> dict[str, Any]:
    kind = policy.WhichOneof("strategy")
    if kind == "exponential":
        e = policy.exponential
        return {"exponential": {"initial_ms": e.initial_ms, "max_ms": e.max_ms, "multiplier": e.multiplier}}
    if kind == "customized":
        return {"customized": {"delays_ms": list(policy.customized.delays_ms)}}
    return {}


def _retry_pb(policy: dict[str, Any]) -> a.RetryPolicy:
    if "exponential" in policy:
        return a.RetryPolicy(exponential=a.ExponentialRetry(**policy["exponential"]))
    if "customized" in policy:
        return a.RetryPolicy(customized=a.CustomizedRetry(delays_ms=policy["customized"]["delays_ms"]))
    return a.RetryPolicy()


def _group_pb(g: GroupConfig) -> a.Group:
    return a.Group(
        name=g.name,
        fifo=g.fifo,
        max_delivery_attempts=g.max_delivery_attempts,
        retry_policy=_retry_pb(g.retry_policy),
        broadcast=g.broadcast,
        namespace=g.namespace,
        create_time_ms=g.create_time_ms,
        update_time_ms=g.update_time_ms,
    )


def _message_type(value: int) -> TopicType:
    if value == a.TopicMessageType.TOPIC_MESSAGE_TYPE_UNSPECIFIED:
        return TopicType.NORMAL
    try:
        return TopicType(a.TopicMessageType.Name(value))  # type: ignore[arg-type]
    except ValueError as exc:
        raise MetadataError("invalid", f"unknown message type {value}") from exc


#
# Security messages <-> store records. Wire enums are named PREFIX_MEMBER (ACL_ACTION_PUB) and map
# by member name onto the store's StrEnums (AclAction.PUB == "Pub").
#

_E = TypeVar("_E", bound=enum.Enum)


def _enum_from_pb(pb_enum: Any, prefix: str, value: int, kind: type[_E], what: str, default: _E | None) -> _E:
    if value == 0:
        if default is None:
            raise SecurityConfigError("invalid", f"{what} is required")
        return default
    try:
        return kind[pb_enum.Name(value).removeprefix(prefix)]
    except (KeyError, ValueError) as exc:
        raise SecurityConfigError("invalid", f"unknown {what} {value}") from exc


def _enum_pb(pb_enum: Any, prefix: str, member: enum.Enum) -> Any:
    return pb_enum.Value(prefix + member.name)


def _access_key_from_pb(k: a.AccessKey) -> AccessKeyConfig:
    return AccessKeyConfig(
        access_key=k.access_key,
        secret_key=k.secret_key,
        namespace=k.namespace,
        status=_enum_from_pb(
            a.AccessKeyStatus,
            "ACCESS_KEY_STATUS_",
            k.status,
            AccessKeyStatus,
            "status",
            AccessKeyStatus.ACTIVE,
        ),
        expires_at_ms=k.expires_at_ms,
    )


def _access_key_pb(k: AccessKeyConfig, with_secret: bool = False) -> a.AccessKey:
    # Secrets leave the broker only when an authenticated operator asks (docs/security.md).
    return a.AccessKey(
        access_key=k.access_key,
        secret_key=k.secret_key if with_secret else "",
        secret_fingerprint=secret_fingerprint(k.access_key, k.secret_key),
        namespace=k.namespace,
        status=_enum_pb(a.AccessKeyStatus, "ACCESS_KEY_STATUS_", k.status),
        expires_at_ms=k.expires_at_ms,
        create_time_ms=k.create_time_ms,
        update_time_ms=k.update_time_ms,
    )


def _acl_from_pb(p: a.AclPolicy) -> AclConfig:
    return AclConfig(
        name=p.name,
        namespace=p.namespace,
        principal=p.principal,
        resource_type=_enum_from_pb(
            a.AclResourceType, "ACL_RESOURCE_TYPE_", p.resource_type, AclResourceType, "resource_type", None
        ),
        resource_pattern=p.resource_pattern,
        pattern_type=_enum_from_pb(
            a.AclPatternType,
            "ACL_PATTERN_TYPE_",
            p.pattern_type,
            AclPatternType,
            "pattern_type",
            AclPatternType.LITERAL,
        ),
        actions=tuple(
            _enum_from_pb(a.AclAction, "ACL_ACTION_", x, AclAction, "action", None) for x in p.actions
        ),
        source_cidrs=tuple(p.source_cidrs),
        decision=_enum_from_pb(a.AclDecision, "ACL_DECISION_", p.decision, AclDecision, "decision", None),
    )


def _acl_pb(p: AclConfig) -> a.AclPolicy:
    return a.AclPolicy(
        name=p.name,
        namespace=p.namespace,
        principal=p.principal,
        resource_type=_enum_pb(a.AclResourceType, "ACL_RESOURCE_TYPE_", p.resource_type),
        resource_pattern=p.resource_pattern,
        pattern_type=_enum_pb(a.AclPatternType, "ACL_PATTERN_TYPE_", p.pattern_type),
        actions=[_enum_pb(a.AclAction, "ACL_ACTION_", x) for x in p.actions],
        source_cidrs=list(p.source_cidrs),
        decision=_enum_pb(a.AclDecision, "ACL_DECISION_", p.decision),
        create_time_ms=p.create_time_ms,
        update_time_ms=p.update_time_ms,
    )


def _scope_name(name: str, namespace: str) -> str:
    return qualified_name(name, namespace) if name else ""


def _quota_from_pb(q: a.Quota) -> QuotaConfig:
    return QuotaConfig(
        namespace=q.namespace,
        topic=_scope_name(q.topic, q.namespace),
        group=_scope_name(q.group, q.namespace),
        limits={name: getattr(q, name) for name in QUOTA_LIMITS if q.HasField(name)},
    )


def _quota_pb(q: QuotaConfig) -> a.Quota:
    return a.Quota(
        namespace=q.namespace,
        topic=q.topic,
        group=q.group,
        create_time_ms=q.create_time_ms,
        update_time_ms=q.update_time_ms,
        **q.limits,
    )


class BrokerAdminServicer(admin_pb2_grpc.BrokerAdminServicer):  # type: ignore[misc]
    """Thin handlers over ``Broker.metadata`` and the store; configuration is persisted on change."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @_guard
    async def CreateTopic(self, request: a.CreateTopicRequest, context: Any) -> a.CreateTopicResponse:
        t = request.topic
        topic = TopicConfig(
            name=qualified_name(t.name, t.namespace),
            queue_count=t.queue_count or 8,
            message_type=_message_type(t.message_type),
            retention_hours=t.retention_hours,
            max_message_bytes=t.max_message_bytes,
            tiered_retention_hours=t.tiered_retention_hours,
        )
        return a.CreateTopicResponse(topic=_topic_pb(self.broker.metadata.create_topic(topic)))

    @_guard
    async def UpdateTopic(self, request: a.UpdateTopicRequest, context: Any) -> a.UpdateTopicResponse:
        changes: dict[str, Any] = {}
        for field in ("queue_count", "retention_hours", "max_message_bytes", "tiered_retention_hours"):
            if request.HasField(field):
                changes[field] = getattr(request, field)
        if request.HasField("message_type"):
            changes["message_type"] = _message_type(request.message_type)
        topic = self.broker.metadata.update_topic(request.name, changes)
        return a.UpdateTopicResponse(topic=_topic_pb(topic))

    @_guard
    async def DeleteTopic(self, request: a.DeleteTopicRequest, context: Any) -> a.DeleteTopicResponse:
        self.broker.metadata.delete_topic(request.name)
        self.broker.forget_topic(request.name)  # every group's positions and offsets on it
        return a.DeleteTopicResponse()

    @_guard
    async def GetTopic(self, request: a.GetTopicRequest, context: Any) -> a.GetTopicResponse:
        topic = self.broker.metadata.get_topic(request.name)
        if topic is None:
            raise MetadataError("not_found", f"topic {request.name!r} not found")
        return a.GetTopicResponse(topic=_topic_pb(topic))

    @_guard
    async def ListTopics(self, request: a.ListTopicsRequest, context: Any) -> a.ListTopicsResponse:
        topics = sorted(self.broker.metadata.topics.values(), key=lambda t: t.name)
        if request.namespace:
            topics = [t for t in topics if t.namespace == request.namespace]
        return a.ListTopicsResponse(topics=[_topic_pb(t) for t in topics])

    def _queue_stats(self, topic: str, qid: int) -> a.QueueStats:
        store = self.broker.store
        low = int(store.get_min_offset_in_queue(topic, qid))
        high = int(store.get_max_offset_in_queue(topic, qid))
        last = 0
        if high > low:
            result = store.get_messages(topic, qid, high - 1, max_count=1)
            last = result.messages[0].store_timestamp if result.messages else 0
        return a.QueueStats(queue_id=qid, min_offset=low, max_offset=high, last_store_time_ms=last)

    @_guard
    async def GetTopicStats(self, request: a.GetTopicStatsRequest, context: Any) -> a.GetTopicStatsResponse:
        if request.name.startswith("%DLQ%"):
            count = 1
        else:
            topic = self.broker.metadata.get_topic(request.name)
            if topic is None:
                raise MetadataError("not_found", f"topic {request.name!r} not found")
            count = topic.queue_count
        return a.GetTopicStatsResponse(
            name=request.name, queues=[self._queue_stats(request.name, q) for q in range(count)]
        )

    @_guard
    async def CreateGroup(self, request: a.CreateGroupRequest, context: Any) -> a.CreateGroupResponse:
        g = request.group
        group = GroupConfig(
            name=qualified_name(g.name, g.namespace),
            fifo=g.fifo,
            max_delivery_attempts=g.max_delivery_attempts,
            retry_policy=_retry_dict(g.retry_policy),
            broadcast=g.broadcast,
        )
        return a.CreateGroupResponse(group=_group_pb(self.broker.metadata.create_group(group)))

    @_guard
    async def UpdateGroup(self, request: a.UpdateGroupRequest, context: Any) -> a.UpdateGroupResponse:
        changes: dict[str, Any] = {}
        for field in ("fifo", "max_delivery_attempts", "broadcast"):
            if request.HasField(field):
                changes[field] = getattr(request, field)
        if request.HasField("retry_policy"):
            changes["retry_policy"] = _retry_dict(request.retry_policy)
        return a.UpdateGroupResponse(
            group=_group_pb(self.broker.metadata.update_group(request.name, changes))
        )

    @_guard
    async def DeleteGroup(self, request: a.DeleteGroupRequest, context: Any) -> a.DeleteGroupResponse:
        self.broker.metadata.delete_group(request.name)
        self.broker.forget_group(request.name)  # its positions and offsets go with it
        return a.DeleteGroupResponse()

    @_guard
    async def GetGroup(self, request: a.GetGroupRequest, context: Any) -> a.GetGroupResponse:
        group = self.broker.metadata.get_group(request.name)
        if group is None:
            raise MetadataError("not_found", f"group {request.name!r} not found")
        return a.GetGroupResponse(group=_group_pb(group))

    @_guard
    async def ListGroups(self, request: a.ListGroupsRequest, context: Any) -> a.ListGroupsResponse:
        groups = sorted(self.broker.metadata.groups.values(), key=lambda g: g.name)
        if request.namespace:
            groups = [g for g in groups if g.namespace == request.namespace]
        return a.ListGroupsResponse(groups=[_group_pb(g) for g in groups])

    @_guard
    async def GetGroupStats(self, request: a.GetGroupStatsRequest, context: Any) -> a.GetGroupStatsResponse:
        if self.broker.metadata.get_group(request.group) is None:
            raise MetadataError("not_found", f"group {request.group!r} not found")
        assert self.broker.pop is not None
        now = int(time.time() * 1000)
        store = self.broker.store
        keys: set[tuple[str, int]] = set()
        for (g, t, q), _ in self.broker.pop.items():
            if g == request.group and (not request.topic or t == request.topic):
                keys.add((t, q))
        if request.topic:
            topic = self.broker.metadata.get_topic(request.topic)
            if topic is not None:
                keys.update((request.topic, q) for q in range(topic.queue_count))
        out = a.GetGroupStatsResponse(group=request.group)
        for t, q in sorted(keys):
            pos = self.broker.pop.peek(request.group, t, q)
            high = int(store.get_max_offset_in_queue(t, q))
            if pos is not None:
                committed = pos.committed()
                in_flight = len(pos.in_flight)
            else:
                committed = self.broker.committed_offset(request.group, t, q)
                committed = committed if committed >= 0 else int(store.get_min_offset_in_queue(t, q))
                in_flight = 0
            lag = max(high - committed, 0)
            lag_ms = 0
            if lag:
                result = store.get_messages(t, q, committed, max_count=1)
                if result.messages:
                    lag_ms = max(now - result.messages[0].store_timestamp, 0)
            out.queues.append(
                a.GroupQueueStats(
                    topic=t,
                    queue_id=q,
                    committed_offset=committed,
                    max_offset=high,
                    lag_messages=lag,
                    lag_ms=lag_ms,
                    in_flight=in_flight,
                )
            )
            out.lag_messages += lag
            out.lag_ms = max(out.lag_ms, lag_ms)
            out.in_flight += in_flight
        return out

    @_guard
    async def ListClients(self, request: a.ListClientsRequest, context: Any) -> a.ListClientsResponse:
        clients = []
        for s in sorted(self.broker.clients.sessions(), key=lambda s: s.client_id):
            if request.namespace and s.namespace != request.namespace:
                continue
            if request.group and s.group != request.group:
                continue
            clients.append(
                a.ClientInfo(
                    client_id=s.client_id,
                    language=s.language,
                    version=s.version,
                    address=s.address,
                    client_type=pb.ClientType.Name(s.client_type)
                    if s.client_type in pb.ClientType.values()
                    else "",
                    group=s.group,
                    topics=sorted(s.topics),
                    last_heartbeat_ms=s.last_seen_ms,
                    namespace=s.namespace or split(s.group)[0],
                )
            )
        return a.ListClientsResponse(clients=clients)

    # Access keys, ACLs and quotas

    @_guard
    async def PutAccessKey(self, request: a.PutAccessKeyRequest, context: Any) -> a.PutAccessKeyResponse:
        key = self.broker.metadata.security.put_access_key(_access_key_from_pb(request.access_key))
        logger.info(
            "access key %s of %s stored", key.access_key, key.namespace, extra={"namespace": key.namespace}
        )
        return a.PutAccessKeyResponse(access_key=_access_key_pb(key))

    @_guard
    async def DeleteAccessKey(
        self, request: a.DeleteAccessKeyRequest, context: Any
    ) -> a.DeleteAccessKeyResponse:
        self.broker.metadata.security.delete_access_key(request.access_key, request.namespace)
        return a.DeleteAccessKeyResponse()

    @_guard
    async def ListAccessKeys(
        self, request: a.ListAccessKeysRequest, context: Any
    ) -> a.ListAccessKeysResponse:
        keys = self.broker.metadata.security.list_access_keys(request.namespace)
        # The admin interceptor has checked the token of every call when one is configured.
        with_secret = request.include_secrets and self.broker.settings.admin_token is not None
        return a.ListAccessKeysResponse(access_keys=[_access_key_pb(k, with_secret) for k in keys])

    @_guard
    async def PutAcl(self, request: a.PutAclRequest, context: Any) -> a.PutAclResponse:
        policy = self.broker.metadata.security.put_acl(_acl_from_pb(request.policy))
        return a.PutAclResponse(policy=_acl_pb(policy))

    @_guard
    async def DeleteAcl(self, request: a.DeleteAclRequest, context: Any) -> a.DeleteAclResponse:
        self.broker.metadata.security.delete_acl(request.namespace, request.name)
        return a.DeleteAclResponse()

    @_guard
    async def ListAcls(self, request: a.ListAclsRequest, context: Any) -> a.ListAclsResponse:
        policies = self.broker.metadata.security.list_acls(request.namespace)
        return a.ListAclsResponse(policies=[_acl_pb(p) for p in policies])

    @_guard
    async def PutQuota(self, request: a.PutQuotaRequest, context: Any) -> a.PutQuotaResponse:
        quota = self.broker.metadata.security.put_quota(_quota_from_pb(request.quota))
        return a.PutQuotaResponse(quota=_quota_pb(quota))

    @_guard
    async def DeleteQuota(self, request: a.DeleteQuotaRequest, context: Any) -> a.DeleteQuotaResponse:
        ns = request.namespace
        self.broker.metadata.security.delete_quota(
            ns, _scope_name(request.topic, ns), _scope_name(request.group, ns)
        )
        return a.DeleteQuotaResponse()

    @_guard
    async def ListQuotas(self, request: a.ListQuotasRequest, context: Any) -> a.ListQuotasResponse:
        quotas = self.broker.metadata.security.list_quotas(request.namespace)
        return a.ListQuotasResponse(quotas=[_quota_pb(q) for q in quotas])
