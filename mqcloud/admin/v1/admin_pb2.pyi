from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TopicMessageType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOPIC_MESSAGE_TYPE_UNSPECIFIED: _ClassVar[TopicMessageType]
    NORMAL: _ClassVar[TopicMessageType]
    FIFO: _ClassVar[TopicMessageType]
    DELAY: _ClassVar[TopicMessageType]
    TRANSACTION: _ClassVar[TopicMessageType]
    MIXED: _ClassVar[TopicMessageType]

class AccessKeyStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCESS_KEY_STATUS_UNSPECIFIED: _ClassVar[AccessKeyStatus]
    ACCESS_KEY_STATUS_ACTIVE: _ClassVar[AccessKeyStatus]
    ACCESS_KEY_STATUS_REVOKED: _ClassVar[AccessKeyStatus]

class AclResourceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_RESOURCE_TYPE_UNSPECIFIED: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_ANY: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_CLUSTER: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_NAMESPACE: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_TOPIC: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_GROUP: _ClassVar[AclResourceType]

class AclPatternType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_PATTERN_TYPE_UNSPECIFIED: _ClassVar[AclPatternType]
    ACL_PATTERN_TYPE_LITERAL: _ClassVar[AclPatternType]
    ACL_PATTERN_TYPE_PREFIXED: _ClassVar[AclPatternType]

class AclAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_ACTION_UNSPECIFIED: _ClassVar[AclAction]
    ACL_ACTION_ALL: _ClassVar[AclAction]
    ACL_ACTION_PUB: _ClassVar[AclAction]
    ACL_ACTION_SUB: _ClassVar[AclAction]
    ACL_ACTION_CREATE: _ClassVar[AclAction]
    ACL_ACTION_UPDATE: _ClassVar[AclAction]
    ACL_ACTION_DELETE: _ClassVar[AclAction]
    ACL_ACTION_GET: _ClassVar[AclAction]
    ACL_ACTION_LIST: _ClassVar[AclAction]

class AclDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_DECISION_UNSPECIFIED: _ClassVar[AclDecision]
    ACL_DECISION_ALLOW: _ClassVar[AclDecision]
    ACL_DECISION_DENY: _ClassVar[AclDecision]
TOPIC_MESSAGE_TYPE_UNSPECIFIED: TopicMessageType
NORMAL: TopicMessageType
FIFO: TopicMessageType
DELAY: TopicMessageType
TRANSACTION: TopicMessageType
MIXED: TopicMessageType
ACCESS_KEY_STATUS_UNSPECIFIED: AccessKeyStatus
ACCESS_KEY_STATUS_ACTIVE: AccessKeyStatus
ACCESS_KEY_STATUS_REVOKED: AccessKeyStatus
ACL_RESOURCE_TYPE_UNSPECIFIED: AclResourceType
ACL_RESOURCE_TYPE_ANY: AclResourceType
ACL_RESOURCE_TYPE_CLUSTER: AclResourceType
ACL_RESOURCE_TYPE_NAMESPACE: AclResourceType
ACL_RESOURCE_TYPE_TOPIC: AclResourceType
ACL_RESOURCE_TYPE_GROUP: AclResourceType
ACL_PATTERN_TYPE_UNSPECIFIED: AclPatternType
ACL_PATTERN_TYPE_LITERAL: AclPatternType
ACL_PATTERN_TYPE_PREFIXED: AclPatternType
ACL_ACTION_UNSPECIFIED: AclAction
ACL_ACTION_ALL: AclAction
ACL_ACTION_PUB: AclAction
ACL_ACTION_SUB: AclAction
ACL_ACTION_CREATE: AclAction
ACL_ACTION_UPDATE: AclAction
ACL_ACTION_DELETE: AclAction
ACL_ACTION_GET: AclAction
ACL_ACTION_LIST: AclAction
ACL_DECISION_UNSPECIFIED: AclDecision
ACL_DECISION_ALLOW: AclDecision
ACL_DECISION_DENY: AclDecision

class Topic(_message.Message):
    __slots__ = ("name", "queue_count", "message_type", "retention_hours", "max_message_bytes", "namespace", "create_time_ms", "update_time_ms", "tiered_retention_hours")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RETENTION_HOURS_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TIERED_RETENTION_HOURS_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue_count: int
    message_type: TopicMessageType
    retention_hours: int
    max_message_bytes: int
    namespace: str
    create_time_ms: int
    update_time_ms: int
    tiered_retention_hours: int
    def __init__(self, name: _Optional[str] = ..., queue_count: _Optional[int] = ..., message_type: _Optional[_Union[TopicMessageType, str]] = ..., retention_hours: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., namespace: _Optional[str] = ..., create_time_ms: _Optional[int] = ..., update_time_ms: _Optional[int] = ..., tiered_retention_hours: _Optional[int] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: Topic
    def __init__(self, topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class CreateTopicResponse(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: Topic
    def __init__(self, topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class UpdateTopicRequest(_message.Message):
    __slots__ = ("name", "queue_count", "message_type", "retention_hours", "max_message_bytes", "tiered_retention_hours")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RETENTION_HOURS_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIERED_RETENTION_HOURS_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue_count: int
    message_type: TopicMessageType
    retention_hours: int
    max_message_bytes: int
    tiered_retention_hours: int
    def __init__(self, name: _Optional[str] = ..., queue_count: _Optional[int] = ..., message_type: _Optional[_Union[TopicMessageType, str]] = ..., retention_hours: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., tiered_retention_hours: _Optional[int] = ...) -> None: ...

class UpdateTopicResponse(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: Topic
    def __init__(self, topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetTopicResponse(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: Topic
    def __init__(self, topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[Topic, _Mapping]]] = ...) -> None: ...

class QueueStats(_message.Message):
    __slots__ = ("queue_id", "min_offset", "max_offset", "last_store_time_ms")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_STORE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    min_offset: int
    max_offset: int
    last_store_time_ms: int
    def __init__(self, queue_id: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., last_store_time_ms: _Optional[int] = ...) -> None: ...

class GetTopicStatsRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetTopicStatsResponse(_message.Message):
    __slots__ = ("name", "queues")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueStats]
    def __init__(self, name: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueStats, _Mapping]]] = ...) -> None: ...

class ExponentialRetry(_message.Message):
    __slots__ = ("initial_ms", "max_ms", "multiplier")
    INITIAL_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_MS_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    initial_ms: int
    max_ms: int
    multiplier: float
    def __init__(self, initial_ms: _Optional[int] = ..., max_ms: _Optional[int] = ..., multiplier: _Optional[float] = ...) -> None: ...

class CustomizedRetry(_message.Message):
    __slots__ = ("delays_ms",)
    DELAYS_MS_FIELD_NUMBER: _ClassVar[int]
    delays_ms: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, delays_ms: _Optional[_Iterable[int]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("exponential", "customized")
    EXPONENTIAL_FIELD_NUMBER: _ClassVar[int]
    CUSTOMIZED_FIELD_NUMBER: _ClassVar[int]
    exponential: ExponentialRetry
    customized: CustomizedRetry
    def __init__(self, exponential: _Optional[_Union[ExponentialRetry, _Mapping]] = ..., customized: _Optional[_Union[CustomizedRetry, _Mapping]] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ("name", "fifo", "max_delivery_attempts", "retry_policy", "broadcast", "namespace", "create_time_ms", "update_time_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FIFO_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERY_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    fifo: bool
    max_delivery_attempts: int
    retry_policy: RetryPolicy
    broadcast: bool
    namespace: str
    create_time_ms: int
    update_time_ms: int
    def __init__(self, name: _Optional[str] = ..., fifo: _Optional[bool] = ..., max_delivery_attempts: _Optional[int] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., broadcast: _Optional[bool] = ..., namespace: _Optional[str] = ..., create_time_ms: _Optional[int] = ..., update_time_ms: _Optional[int] = ...) -> None: ...

class CreateGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: Group
    def __init__(self, group: _Optional[_Union[Group, _Mapping]] = ...) -> None: ...

class CreateGroupResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: Group
    def __init__(self, group: _Optional[_Union[Group, _Mapping]] = ...) -> None: ...

class UpdateGroupRequest(_message.Message):
    __slots__ = ("name", "fifo", "max_delivery_attempts", "retry_policy", "broadcast")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FIFO_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERY_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_FIELD_NUMBER: _ClassVar[int]
    name: str
    fifo: bool
    max_delivery_attempts: int
    retry_policy: RetryPolicy
    broadcast: bool
    def __init__(self, name: _Optional[str] = ..., fifo: _Optional[bool] = ..., max_delivery_attempts: _Optional[int] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., broadcast: _Optional[bool] = ...) -> None: ...

class UpdateGroupResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: Group
    def __init__(self, group: _Optional[_Union[Group, _Mapping]] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteGroupResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetGroupRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetGroupResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: Group
    def __init__(self, group: _Optional[_Union[Group, _Mapping]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[Group]
    def __init__(self, groups: _Optional[_Iterable[_Union[Group, _Mapping]]] = ...) -> None: ...

class GroupQueueStats(_message.Message):
    __slots__ = ("topic", "queue_id", "committed_offset", "max_offset", "lag_messages", "lag_ms", "in_flight")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LAG_MS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    committed_offset: int
    max_offset: int
    lag_messages: int
    lag_ms: int
    in_flight: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., committed_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., lag_messages: _Optional[int] = ..., lag_ms: _Optional[int] = ..., in_flight: _Optional[int] = ...) -> None: ...

class GetGroupStatsRequest(_message.Message):
    __slots__ = ("group", "topic")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class GetGroupStatsResponse(_message.Message):
    __slots__ = ("group", "queues", "lag_messages", "lag_ms", "in_flight")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    LAG_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LAG_MS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    group: str
    queues: _containers.RepeatedCompositeFieldContainer[GroupQueueStats]
    lag_messages: int
    lag_ms: int
    in_flight: int
    def __init__(self, group: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[GroupQueueStats, _Mapping]]] = ..., lag_messages: _Optional[int] = ..., lag_ms: _Optional[int] = ..., in_flight: _Optional[int] = ...) -> None: ...

class ClientInfo(_message.Message):
    __slots__ = ("client_id", "language", "version", "address", "client_type", "group", "topics", "last_heartbeat_ms", "namespace")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    language: str
    version: str
    address: str
    client_type: str
    group: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    last_heartbeat_ms: int
    namespace: str
    def __init__(self, client_id: _Optional[str] = ..., language: _Optional[str] = ..., version: _Optional[str] = ..., address: _Optional[str] = ..., client_type: _Optional[str] = ..., group: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., last_heartbeat_ms: _Optional[int] = ..., namespace: _Optional[str] = ...) -> None: ...

class ListClientsRequest(_message.Message):
    __slots__ = ("namespace", "group")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    group: str
    def __init__(self, namespace: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class ListClientsResponse(_message.Message):
    __slots__ = ("clients",)
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    clients: _containers.RepeatedCompositeFieldContainer[ClientInfo]
    def __init__(self, clients: _Optional[_Iterable[_Union[ClientInfo, _Mapping]]] = ...) -> None: ...

class AccessKey(_message.Message):
    __slots__ = ("access_key", "secret_key", "namespace", "status", "expires_at_ms", "create_time_ms", "update_time_ms", "secret_fingerprint")
    ACCESS_KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_KEY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    SECRET_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    access_key: str
    secret_key: str
    namespace: str
    status: AccessKeyStatus
    expires_at_ms: int
    create_time_ms: int
    update_time_ms: int
    secret_fingerprint: str
    def __init__(self, access_key: _Optional[str] = ..., secret_key: _Optional[str] = ..., namespace: _Optional[str] = ..., status: _Optional[_Union[AccessKeyStatus, str]] = ..., expires_at_ms: _Optional[int] = ..., create_time_ms: _Optional[int] = ..., update_time_ms: _Optional[int] = ..., secret_fingerprint: _Optional[str] = ...) -> None: ...

class PutAccessKeyRequest(_message.Message):
    __slots__ = ("access_key",)
    ACCESS_KEY_FIELD_NUMBER: _ClassVar[int]
    access_key: AccessKey
    def __init__(self, access_key: _Optional[_Union[AccessKey, _Mapping]] = ...) -> None: ...

class PutAccessKeyResponse(_message.Message):
    __slots__ = ("access_key",)
    ACCESS_KEY_FIELD_NUMBER: _ClassVar[int]
    access_key: AccessKey
    def __init__(self, access_key: _Optional[_Union[AccessKey, _Mapping]] = ...) -> None: ...

class DeleteAccessKeyRequest(_message.Message):
    __slots__ = ("access_key", "namespace")
    ACCESS_KEY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    access_key: str
    namespace: str
    def __init__(self, access_key: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class DeleteAccessKeyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAccessKeysRequest(_message.Message):
    __slots__ = ("namespace", "include_secrets")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SECRETS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    include_secrets: bool
    def __init__(self, namespace: _Optional[str] = ..., include_secrets: _Optional[bool] = ...) -> None: ...

class ListAccessKeysResponse(_message.Message):
    __slots__ = ("access_keys",)
    ACCESS_KEYS_FIELD_NUMBER: _ClassVar[int]
    access_keys: _containers.RepeatedCompositeFieldContainer[AccessKey]
    def __init__(self, access_keys: _Optional[_Iterable[_Union[AccessKey, _Mapping]]] = ...) -> None: ...

class AclPolicy(_message.Message):
    __slots__ = ("name", "namespace", "principal", "resource_type", "resource_pattern", "pattern_type", "actions", "source_cidrs", "decision", "create_time_ms", "update_time_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CIDRS_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace: str
    principal: str
    resource_type: AclResourceType
    resource_pattern: str
    pattern_type: AclPatternType
    actions: _containers.RepeatedScalarFieldContainer[AclAction]
    source_cidrs: _containers.RepeatedScalarFieldContainer[str]
    decision: AclDecision
    create_time_ms: int
    update_time_ms: int
    def __init__(self, name: _Optional[str] = ..., namespace: _Optional[str] = ..., principal: _Optional[str] = ..., resource_type: _Optional[_Union[AclResourceType, str]] = ..., resource_pattern: _Optional[str] = ..., pattern_type: _Optional[_Union[AclPatternType, str]] = ..., actions: _Optional[_Iterable[_Union[AclAction, str]]] = ..., source_cidrs: _Optional[_Iterable[str]] = ..., decision: _Optional[_Union[AclDecision, str]] = ..., create_time_ms: _Optional[int] = ..., update_time_ms: _Optional[int] = ...) -> None: ...

class PutAclRequest(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: AclPolicy
    def __init__(self, policy: _Optional[_Union[AclPolicy, _Mapping]] = ...) -> None: ...

class PutAclResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: AclPolicy
    def __init__(self, policy: _Optional[_Union[AclPolicy, _Mapping]] = ...) -> None: ...

class DeleteAclRequest(_message.Message):
    __slots__ = ("namespace", "name")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteAclResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAclsRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class ListAclsResponse(_message.Message):
    __slots__ = ("policies",)
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    policies: _containers.RepeatedCompositeFieldContainer[AclPolicy]
    def __init__(self, policies: _Optional[_Iterable[_Union[AclPolicy, _Mapping]]] = ...) -> None: ...

class Quota(_message.Message):
    __slots__ = ("namespace", "topic", "group", "produce_messages_per_s", "produce_bytes_per_s", "consume_messages_per_s", "consume_bytes_per_s", "storage_bytes", "max_topics", "max_groups", "max_message_bytes", "max_connections", "create_time_ms", "update_time_ms")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    PRODUCE_MESSAGES_PER_S_FIELD_NUMBER: _ClassVar[int]
    PRODUCE_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    CONSUME_MESSAGES_PER_S_FIELD_NUMBER: _ClassVar[int]
    CONSUME_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    STORAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOPICS_FIELD_NUMBER: _ClassVar[int]
    MAX_GROUPS_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    topic: str
    group: str
    produce_messages_per_s: int
    produce_bytes_per_s: int
    consume_messages_per_s: int
    consume_bytes_per_s: int
    storage_bytes: int
    max_topics: int
    max_groups: int
    max_message_bytes: int
    max_connections: int
    create_time_ms: int
    update_time_ms: int
    def __init__(self, namespace: _Optional[str] = ..., topic: _Optional[str] = ..., group: _Optional[str] = ..., produce_messages_per_s: _Optional[int] = ..., produce_bytes_per_s: _Optional[int] = ..., consume_messages_per_s: _Optional[int] = ..., consume_bytes_per_s: _Optional[int] = ..., storage_bytes: _Optional[int] = ..., max_topics: _Optional[int] = ..., max_groups: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., max_connections: _Optional[int] = ..., create_time_ms: _Optional[int] = ..., update_time_ms: _Optional[int] = ...) -> None: ...

class PutQuotaRequest(_message.Message):
    __slots__ = ("quota",)
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    quota: Quota
    def __init__(self, quota: _Optional[_Union[Quota, _Mapping]] = ...) -> None: ...

class PutQuotaResponse(_message.Message):
    __slots__ = ("quota",)
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    quota: Quota
    def __init__(self, quota: _Optional[_Union[Quota, _Mapping]] = ...) -> None: ...

class DeleteQuotaRequest(_message.Message):
    __slots__ = ("namespace", "topic", "group")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    topic: str
    group: str
    def __init__(self, namespace: _Optional[str] = ..., topic: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class DeleteQuotaResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListQuotasRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class ListQuotasResponse(_message.Message):
    __slots__ = ("quotas",)
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    quotas: _containers.RepeatedCompositeFieldContainer[Quota]
    def __init__(self, quotas: _Optional[_Iterable[_Union[Quota, _Mapping]]] = ...) -> None: ...
