from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetTierStatusRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class TopicTierBytes(_message.Message):
    __slots__ = ("topic", "local_bytes", "tiered_bytes")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    LOCAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIERED_BYTES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    local_bytes: int
    tiered_bytes: int
    def __init__(self, topic: _Optional[str] = ..., local_bytes: _Optional[int] = ..., tiered_bytes: _Optional[int] = ...) -> None: ...

class GetTierStatusResponse(_message.Message):
    __slots__ = ("url", "manifest_loaded", "is_master", "manifest_generation", "tiered_segments", "tiered_bytes", "tiered_min_offset", "tiered_end_offset", "local_segments", "local_bytes", "local_min_offset", "max_offset", "confirmed_offset", "offload_lag_bytes", "offload_lag_seconds", "segments_offloaded", "segments_expired", "offload_failures", "last_error", "last_error_ms", "last_success_ms", "cache_hits", "cache_misses", "cache_hit_rate", "cache_bytes", "cache_capacity_bytes", "prefetched_blocks", "topics")
    URL_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_LOADED_FIELD_NUMBER: _ClassVar[int]
    IS_MASTER_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_GENERATION_FIELD_NUMBER: _ClassVar[int]
    TIERED_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    TIERED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIERED_MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIERED_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOCAL_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOCAL_MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    OFFLOAD_LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    OFFLOAD_LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_OFFLOADED_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    OFFLOAD_FAILURES_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_MS_FIELD_NUMBER: _ClassVar[int]
    CACHE_HITS_FIELD_NUMBER: _ClassVar[int]
    CACHE_MISSES_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_RATE_FIELD_NUMBER: _ClassVar[int]
    CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CACHE_CAPACITY_BYTES_FIELD_NUMBER: _ClassVar[int]
    PREFETCHED_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    url: str
    manifest_loaded: bool
    is_master: bool
    manifest_generation: int
    tiered_segments: int
    tiered_bytes: int
    tiered_min_offset: int
    tiered_end_offset: int
    local_segments: int
    local_bytes: int
    local_min_offset: int
    max_offset: int
    confirmed_offset: int
    offload_lag_bytes: int
    offload_lag_seconds: float
    segments_offloaded: int
    segments_expired: int
    offload_failures: int
    last_error: str
    last_error_ms: int
    last_success_ms: int
    cache_hits: int
    cache_misses: int
    cache_hit_rate: float
    cache_bytes: int
    cache_capacity_bytes: int
    prefetched_blocks: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicTierBytes]
    def __init__(self, url: _Optional[str] = ..., manifest_loaded: _Optional[bool] = ..., is_master: _Optional[bool] = ..., manifest_generation: _Optional[int] = ..., tiered_segments: _Optional[int] = ..., tiered_bytes: _Optional[int] = ..., tiered_min_offset: _Optional[int] = ..., tiered_end_offset: _Optional[int] = ..., local_segments: _Optional[int] = ..., local_bytes: _Optional[int] = ..., local_min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., confirmed_offset: _Optional[int] = ..., offload_lag_bytes: _Optional[int] = ..., offload_lag_seconds: _Optional[float] = ..., segments_offloaded: _Optional[int] = ..., segments_expired: _Optional[int] = ..., offload_failures: _Optional[int] = ..., last_error: _Optional[str] = ..., last_error_ms: _Optional[int] = ..., last_success_ms: _Optional[int] = ..., cache_hits: _Optional[int] = ..., cache_misses: _Optional[int] = ..., cache_hit_rate: _Optional[float] = ..., cache_bytes: _Optional[int] = ..., cache_capacity_bytes: _Optional[int] = ..., prefetched_blocks: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicTierBytes, _Mapping]]] = ...) -> None: ...
