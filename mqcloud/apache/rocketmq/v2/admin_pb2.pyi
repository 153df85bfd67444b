import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from mqcloud.apache.rocketmq.v2 import definition_pb2 as _definition_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MessageModel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MESSAGE_MODEL_UNSPECIFIED: _ClassVar[MessageModel]
    CLUSTERING: _ClassVar[MessageModel]
    BROADCASTING: _ClassVar[MessageModel]
    LITE_SELECTIVE: _ClassVar[MessageModel]
MESSAGE_MODEL_UNSPECIFIED: MessageModel
CLUSTERING: MessageModel
BROADCASTING: MessageModel
LITE_SELECTIVE: MessageModel

class ChangeLogLevelRequest(_message.Message):
    __slots__ = ("level",)
    class Level(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TRACE: _ClassVar[ChangeLogLevelRequest.Level]
        DEBUG: _ClassVar[ChangeLogLevelRequest.Level]
        INFO: _ClassVar[ChangeLogLevelRequest.Level]
        WARN: _ClassVar[ChangeLogLevelRequest.Level]
        ERROR: _ClassVar[ChangeLogLevelRequest.Level]
    TRACE: ChangeLogLevelRequest.Level
    DEBUG: ChangeLogLevelRequest.Level
    INFO: ChangeLogLevelRequest.Level
    WARN: ChangeLogLevelRequest.Level
    ERROR: ChangeLogLevelRequest.Level
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    level: ChangeLogLevelRequest.Level
    def __init__(self, level: _Optional[_Union[ChangeLogLevelRequest.Level, str]] = ...) -> None: ...

class ChangeLogLevelResponse(_message.Message):
    __slots__ = ("remark",)
    REMARK_FIELD_NUMBER: _ClassVar[int]
    remark: str
    def __init__(self, remark: _Optional[str] = ...) -> None: ...

class DescribeTopicStatusRequest(_message.Message):
    __slots__ = ("deployment_name", "topic")
    DEPLOYMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    deployment_name: str
    topic: _definition_pb2.Resource
    def __init__(self, deployment_name: _Optional[str] = ..., topic: _Optional[_Union[_definition_pb2.Resource, _Mapping]] = ...) -> None: ...

class DescribeTopicStatusResponse(_message.Message):
    __slots__ = ("status", "topic_message_type", "description", "create_timestamp", "tags")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    topic_message_type: _definition_pb2.MessageType
    description: str
    create_timestamp: _timestamp_pb2.Timestamp
    tags: _containers.ScalarMap[str, str]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., topic_message_type: _Optional[_Union[_definition_pb2.MessageType, str]] = ..., description: _Optional[str] = ..., create_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ClientInfo(_message.Message):
    __slots__ = ("client_id", "version", "language", "hostname", "egress_ip", "message_model")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    EGRESS_IP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    version: str
    language: str
    hostname: str
    egress_ip: str
    message_model: MessageModel
    def __init__(self, client_id: _Optional[str] = ..., version: _Optional[str] = ..., language: _Optional[str] = ..., hostname: _Optional[str] = ..., egress_ip: _Optional[str] = ..., message_model: _Optional[_Union[MessageModel, str]] = ...) -> None: ...

class ListConsumerConnectionRequest(_message.Message):
    __slots__ = ("deployment_name", "group", "topic", "liteTopic")
    DEPLOYMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    LITETOPIC_FIELD_NUMBER: _ClassVar[int]
    deployment_name: str
    group: _definition_pb2.Resource
    topic: _definition_pb2.Resource
    liteTopic: str
    def __init__(self, deployment_name: _Optional[str] = ..., group: _Optional[_Union[_definition_pb2.Resource, _Mapping]] = ..., topic: _Optional[_Union[_definition_pb2.Resource, _Mapping]] = ..., liteTopic: _Optional[str] = ...) -> None: ...

class ListConsumerConnectionResponse(_message.Message):
    __slots__ = ("status", "client_info")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_INFO_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    client_info: _containers.RepeatedCompositeFieldContainer[ClientInfo]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., client_info: _Optional[_Iterable[_Union[ClientInfo, _Mapping]]] = ...) -> None: ...

class ResetGroupOffsetRequest(_message.Message):
    __slots__ = ("deployment_name", "group", "topic", "reset_timestamp")
    DEPLOYMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    RESET_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    deployment_name: str
    group: _definition_pb2.Resource
    topic: _definition_pb2.Resource
    reset_timestamp: _timestamp_pb2.Timestamp
    def __init__(self, deployment_name: _Optional[str] = ..., group: _Optional[_Union[_definition_pb2.Resource, _Mapping]] = ..., topic: _Optional[_Union[_definition_pb2.Resource, _Mapping]] = ..., reset_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ResetGroupOffsetResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ...) -> None: ...
