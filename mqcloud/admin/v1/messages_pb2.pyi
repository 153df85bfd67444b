from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResetTarget(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESET_TARGET_UNSPECIFIED: _ClassVar[ResetTarget]
    RESET_TARGET_BEGINNING: _ClassVar[ResetTarget]
    RESET_TARGET_END: _ClassVar[ResetTarget]
    RESET_TARGET_TIME: _ClassVar[ResetTarget]
RESET_TARGET_UNSPECIFIED: ResetTarget
RESET_TARGET_BEGINNING: ResetTarget
RESET_TARGET_END: ResetTarget
RESET_TARGET_TIME: ResetTarget

class MessageView(_message.Message):
    __slots__ = ("message_id", "offset_message_id", "topic", "queue_id", "queue_offset", "tag", "keys", "message_group", "born_time_ms", "store_time_ms", "delivery_time_ms", "body", "body_size", "properties", "system_properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class SystemPropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_GROUP_FIELD_NUMBER: _ClassVar[int]
    BORN_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    STORE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    BODY_SIZE_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    offset_message_id: str
    topic: str
    queue_id: int
    queue_offset: int
    tag: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    message_group: str
    born_time_ms: int
    store_time_ms: int
    delivery_time_ms: int
    body: bytes
    body_size: int
    properties: _containers.ScalarMap[str, str]
    system_properties: _containers.ScalarMap[str, str]
    def __init__(self, message_id: _Optional[str] = ..., offset_message_id: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., tag: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., message_group: _Optional[str] = ..., born_time_ms: _Optional[int] = ..., store_time_ms: _Optional[int] = ..., delivery_time_ms: _Optional[int] = ..., body: _Optional[bytes] = ..., body_size: _Optional[int] = ..., properties: _Optional[_Mapping[str, str]] = ..., system_properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TimeRange(_message.Message):
    __slots__ = ("begin_ms", "end_ms")
    BEGIN_MS_FIELD_NUMBER: _ClassVar[int]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    begin_ms: int
    end_ms: int
    def __init__(self, begin_ms: _Optional[int] = ..., end_ms: _Optional[int] = ...) -> None: ...

class QueuePoint(_message.Message):
    __slots__ = ("queue_id", "offset")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    offset: int
    def __init__(self, queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class QueryMessagesRequest(_message.Message):
    __slots__ = ("topic", "message_id", "key", "time_range", "queue", "limit", "range")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    message_id: str
    key: str
    time_range: TimeRange
    queue: QueuePoint
    limit: int
    range: TimeRange
    def __init__(self, topic: _Optional[str] = ..., message_id: _Optional[str] = ..., key: _Optional[str] = ..., time_range: _Optional[_Union[TimeRange, _Mapping]] = ..., queue: _Optional[_Union[QueuePoint, _Mapping]] = ..., limit: _Optional[int] = ..., range: _Optional[_Union[TimeRange, _Mapping]] = ...) -> None: ...

class QueryMessagesResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[MessageView]
    def __init__(self, messages: _Optional[_Iterable[_Union[MessageView, _Mapping]]] = ...) -> None: ...

class SendTestMessageRequest(_message.Message):
    __slots__ = ("topic", "body", "tag", "keys", "properties", "message_group", "delivery_time_ms", "queue_id")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_GROUP_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    body: bytes
    tag: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    properties: _containers.ScalarMap[str, str]
    message_group: str
    delivery_time_ms: int
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., body: _Optional[bytes] = ..., tag: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., properties: _Optional[_Mapping[str, str]] = ..., message_group: _Optional[str] = ..., delivery_time_ms: _Optional[int] = ..., queue_id: _Optional[int] = ...) -> None: ...

class SendTestMessageResponse(_message.Message):
    __slots__ = ("message_id", "queue_id", "queue_offset")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    queue_id: int
    queue_offset: int
    def __init__(self, message_id: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class TraceEvent(_message.Message):
    __slots__ = ("event", "time_ms", "group", "attempt", "client_id", "detail")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    event: str
    time_ms: int
    group: str
    attempt: int
    client_id: str
    detail: str
    def __init__(self, event: _Optional[str] = ..., time_ms: _Optional[int] = ..., group: _Optional[str] = ..., attempt: _Optional[int] = ..., client_id: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class GetMessageTraceRequest(_message.Message):
    __slots__ = ("topic", "message_id", "limit")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    message_id: str
    limit: int
    def __init__(self, topic: _Optional[str] = ..., message_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class GetMessageTraceResponse(_message.Message):
    __slots__ = ("message_id", "events")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    events: _containers.RepeatedCompositeFieldContainer[TraceEvent]
    def __init__(self, message_id: _Optional[str] = ..., events: _Optional[_Iterable[_Union[TraceEvent, _Mapping]]] = ...) -> None: ...

class ResetOffsetRequest(_message.Message):
    __slots__ = ("group", "topic", "to", "time_ms")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    to: ResetTarget
    time_ms: int
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., to: _Optional[_Union[ResetTarget, str]] = ..., time_ms: _Optional[int] = ...) -> None: ...

class ResetOffsetResponse(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueuePoint]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueuePoint, _Mapping]]] = ...) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = ("group", "limit", "include_redriven")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_REDRIVEN_FIELD_NUMBER: _ClassVar[int]
    group: str
    limit: int
    include_redriven: bool
    def __init__(self, group: _Optional[str] = ..., limit: _Optional[int] = ..., include_redriven: _Optional[bool] = ...) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[MessageView]
    def __init__(self, messages: _Optional[_Iterable[_Union[MessageView, _Mapping]]] = ...) -> None: ...

class RedriveDeadLettersRequest(_message.Message):
    __slots__ = ("group", "message_ids", "all")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    group: str
    message_ids: _containers.RepeatedScalarFieldContainer[str]
    all: bool
    def __init__(self, group: _Optional[str] = ..., message_ids: _Optional[_Iterable[str]] = ..., all: _Optional[bool] = ...) -> None: ...

class RedriveDeadLettersResponse(_message.Message):
    __slots__ = ("redriven",)
    REDRIVEN_FIELD_NUMBER: _ClassVar[int]
    redriven: int
    def __init__(self, redriven: _Optional[int] = ...) -> None: ...
