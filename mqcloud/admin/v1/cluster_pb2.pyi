from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicaStatus(_message.Message):
    __slots__ = ("node", "ha_address", "confirmed_offset", "lag_bytes", "in_sync", "lag_p99_ms")
    NODE_FIELD_NUMBER: _ClassVar[int]
    HA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    LAG_P99_MS_FIELD_NUMBER: _ClassVar[int]
    node: str
    ha_address: str
    confirmed_offset: int
    lag_bytes: int
    in_sync: bool
    lag_p99_ms: float
    def __init__(self, node: _Optional[str] = ..., ha_address: _Optional[str] = ..., confirmed_offset: _Optional[int] = ..., lag_bytes: _Optional[int] = ..., in_sync: _Optional[bool] = ..., lag_p99_ms: _Optional[float] = ...) -> None: ...

class ClusterNodeStatus(_message.Message):
    __slots__ = ("group", "node", "address", "role", "epoch", "max_offset", "master", "master_address", "sync_state_set", "writable", "min_in_sync_replicas", "replicas", "controller")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MASTER_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_FIELD_NUMBER: _ClassVar[int]
    MIN_IN_SYNC_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    group: str
    node: str
    address: str
    role: str
    epoch: int
    max_offset: int
    master: str
    master_address: str
    sync_state_set: _containers.RepeatedScalarFieldContainer[str]
    writable: bool
    min_in_sync_replicas: int
    replicas: _containers.RepeatedCompositeFieldContainer[ReplicaStatus]
    controller: str
    def __init__(self, group: _Optional[str] = ..., node: _Optional[str] = ..., address: _Optional[str] = ..., role: _Optional[str] = ..., epoch: _Optional[int] = ..., max_offset: _Optional[int] = ..., master: _Optional[str] = ..., master_address: _Optional[str] = ..., sync_state_set: _Optional[_Iterable[str]] = ..., writable: _Optional[bool] = ..., min_in_sync_replicas: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[ReplicaStatus, _Mapping]]] = ..., controller: _Optional[str] = ...) -> None: ...

class GetClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetClusterStatusResponse(_message.Message):
    __slots__ = ("node", "group_nodes")
    NODE_FIELD_NUMBER: _ClassVar[int]
    GROUP_NODES_FIELD_NUMBER: _ClassVar[int]
    node: ClusterNodeStatus
    group_nodes: _containers.RepeatedCompositeFieldContainer[ClusterNodeStatus]
    def __init__(self, node: _Optional[_Union[ClusterNodeStatus, _Mapping]] = ..., group_nodes: _Optional[_Iterable[_Union[ClusterNodeStatus, _Mapping]]] = ...) -> None: ...
