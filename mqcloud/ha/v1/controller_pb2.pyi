from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    MASTER: _ClassVar[Role]
    REPLICA: _ClassVar[Role]
ROLE_UNSPECIFIED: Role
MASTER: Role
REPLICA: Role

class NodeAddress(_message.Message):
    __slots__ = ("node", "address", "ha_address")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    node: str
    address: str
    ha_address: str
    def __init__(self, node: _Optional[str] = ..., address: _Optional[str] = ..., ha_address: _Optional[str] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("group", "self", "max_offset", "epoch", "role", "in_sync_replicas", "master_epoch")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    group: str
    self: NodeAddress
    max_offset: int
    epoch: int
    role: Role
    in_sync_replicas: _containers.RepeatedScalarFieldContainer[str]
    master_epoch: int
    def __init__(self_, group: _Optional[str] = ..., self: _Optional[_Union[NodeAddress, _Mapping]] = ..., max_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., in_sync_replicas: _Optional[_Iterable[str]] = ..., master_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("active", "active_controller", "role", "master", "master_epoch", "sync_state_set", "lease_ms", "master_alive", "replicas")
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    MASTER_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    MASTER_ALIVE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    active: bool
    active_controller: str
    role: Role
    master: NodeAddress
    master_epoch: int
    sync_state_set: _containers.RepeatedScalarFieldContainer[str]
    lease_ms: int
    master_alive: bool
    replicas: _containers.RepeatedCompositeFieldContainer[NodeAddress]
    def __init__(self, active: _Optional[bool] = ..., active_controller: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., master: _Optional[_Union[NodeAddress, _Mapping]] = ..., master_epoch: _Optional[int] = ..., sync_state_set: _Optional[_Iterable[str]] = ..., lease_ms: _Optional[int] = ..., master_alive: _Optional[bool] = ..., replicas: _Optional[_Iterable[_Union[NodeAddress, _Mapping]]] = ...) -> None: ...

class NodeState(_message.Message):
    __slots__ = ("address", "role", "alive", "max_offset", "epoch", "last_heartbeat_ms_ago")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_AGO_FIELD_NUMBER: _ClassVar[int]
    address: NodeAddress
    role: Role
    alive: bool
    max_offset: int
    epoch: int
    last_heartbeat_ms_ago: int
    def __init__(self, address: _Optional[_Union[NodeAddress, _Mapping]] = ..., role: _Optional[_Union[Role, str]] = ..., alive: _Optional[bool] = ..., max_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., last_heartbeat_ms_ago: _Optional[int] = ...) -> None: ...

class GroupState(_message.Message):
    __slots__ = ("group", "master", "master_epoch", "sync_state_set", "sync_state_set_epoch", "nodes")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MASTER_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    group: str
    master: str
    master_epoch: int
    sync_state_set: _containers.RepeatedScalarFieldContainer[str]
    sync_state_set_epoch: int
    nodes: _containers.RepeatedCompositeFieldContainer[NodeState]
    def __init__(self, group: _Optional[str] = ..., master: _Optional[str] = ..., master_epoch: _Optional[int] = ..., sync_state_set: _Optional[_Iterable[str]] = ..., sync_state_set_epoch: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[NodeState, _Mapping]]] = ...) -> None: ...

class GetGroupsRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class GetGroupsResponse(_message.Message):
    __slots__ = ("active", "active_controller", "controller_id", "groups")
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    active: bool
    active_controller: str
    controller_id: str
    groups: _containers.RepeatedCompositeFieldContainer[GroupState]
    def __init__(self, active: _Optional[bool] = ..., active_controller: _Optional[str] = ..., controller_id: _Optional[str] = ..., groups: _Optional[_Iterable[_Union[GroupState, _Mapping]]] = ...) -> None: ...
