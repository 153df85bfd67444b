"""Topic and consumer-group configuration, persisted atomically as JSON in the data dir.

Access keys, ACLs and quotas live next to it in ``security.json`` (``dataplane.security_store``,
mode 0600); ``MetadataStore.security`` holds them and the read helpers below expose them.

The broker serves from this file when the control plane is away; every change rewrites it with
write-to-temp, fsync, rename, so a crash leaves either the old or the new version.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from dataplane.names import qualify, split
from dataplane.security_store import AccessKeyConfig, AclConfig, SecurityStore

__all__ = ("GroupConfig", "MetadataError", "MetadataStore", "TopicConfig", "TopicType")

_MAX_QUEUES = 1024


class TopicType(enum.StrEnum):
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


class MetadataError(Exception):
    """Configuration request refused; ``kind`` is invalid / not_found / exists."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclasses.dataclass(slots=True)
class TopicConfig:
    name: str
    queue_count: int = 8
    message_type: TopicType = TopicType.NORMAL
    retention_hours: int = 0
    max_message_bytes: int = 0
    create_time_ms: int = 0
    update_time_ms: int = 0
    # Tiered storage: hours in the object store after the hot retention (0: not kept past it).
    tiered_retention_hours: int = 0

    @property
    def namespace(self) -> str:
        return split(self.name)[0]


@dataclasses.dataclass(slots=True)
class GroupConfig:
    name: str
    fifo: bool = False
    max_delivery_attempts: int = 0
    # {"exponential": {"initial_ms", "max_ms", "multiplier"}} or {"customized": {"delays_ms": [...]}}
    retry_policy: dict[str, Any] = dataclasses.field(default_factory=dict)
    broadcast: bool = False
    create_time_ms: int = 0
    update_time_ms: int = 0

    @property
    def namespace(self) -> str:
        return split(self.name)[0]


def _now_ms() -> int:
    return int(time.time() * 1000)


def qualified_name(name: str, namespace: str) -> str:
    """``ns%name`` from either an already-qualified name or a bare name plus a namespace."""
    if "%" in name:
        if namespace and split(name)[0] != namespace:
            raise MetadataError("invalid", f"name {name!r} is not in namespace {namespace!r}")
        return name
    return qualify(namespace, name)


def _check_name(name: str) -> None:
    ns, bare = split(name)
    for part in (ns, bare):
        if len(part) > 127 or not all(c.isalnum() or c in "-_" for c in part):
            raise MetadataError("invalid", f"illegal name {name!r}: use [A-Za-z0-9_-], namespace%name")
    if not bare:
        raise MetadataError("invalid", "name must not be empty")


def validate_topic(topic: TopicConfig) -> None:
    _check_name(topic.name)
    if not 1 <= topic.queue_count <= _MAX_QUEUES:
        raise MetadataError("invalid", f"queue_count must be 1..{_MAX_QUEUES}, got {topic.queue_count}")
    if topic.retention_hours < 0 or topic.max_message_bytes < 0 or topic.tiered_retention_hours < 0:
        raise MetadataError(
            "invalid", "retention_hours, tiered_retention_hours and max_message_bytes must be >= 0"
        )


def validate_group(group: GroupConfig) -> None:
    _check_name(group.name)
    if not 0 <= group.max_delivery_attempts <= 1000:
        raise MetadataError("invalid", "max_delivery_attempts must be 0..1000")
    policy = group.retry_policy
    if policy and set(policy) - {"exponential", "customized"}:
        raise MetadataError("invalid", f"unknown retry policy {sorted(policy)}")


class MetadataStore:
    """Thread-safe, persisted topic and group tables (``{data_dir}/metadata.json``)."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / "metadata.json"
        self._lock = threading.Lock()
        self.topics: dict[str, TopicConfig] = {}
        self.groups: dict[str, GroupConfig] = {}
        self._load()
        self.security = SecurityStore(data_dir)

    def _load(self) -> None:
        if not self._path.exists():
            return
        raw = json.loads(self._path.read_text())
        for item in raw.get("topics", []):
            item["message_type"] = TopicType(item["message_type"])
            topic = TopicConfig(**item)
            self.topics[topic.name] = topic
        for item in raw.get("groups", []):
            group = GroupConfig(**item)
            self.groups[group.name] = group

    def _save(self) -> None:
        data = {
            "version": 1,
            "topics": [dataclasses.asdict(t) for t in self.topics.values()],
            "groups": [dataclasses.asdict(g) for g in self.groups.values()],
        }
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # Topics

    def create_topic(self, topic: TopicConfig) -> TopicConfig:
        validate_topic(topic)
        with self._lock:
            if topic.name in self.topics:
                raise MetadataError("exists", f"topic {topic.name!r} already exists")
            topic.create_time_ms = topic.update_time_ms = _now_ms()
            self.topics[topic.name] = topic
            self._save()
            return topic

    def update_topic(self, name: str, changes: dict[str, Any]) -> TopicConfig:
        with self._lock:
            current = self.topics.get(name)
            if current is None:
                raise MetadataError("not_found", f"topic {name!r} not found")
            updated = dataclasses.replace(current, **changes)
            validate_topic(updated)
            if updated.queue_count < current.queue_count:
                raise MetadataError("invalid", "queue_count can only grow")
            updated.update_time_ms = _now_ms()
            self.topics[name] = updated
            self._save()
            return updated

    def delete_topic(self, name: str) -> None:
        with self._lock:
            if self.topics.pop(name, None) is None:
                raise MetadataError("not_found", f"topic {name!r} not found")
            self._save()

    def get_topic(self, name: str) -> TopicConfig | None:
        return self.topics.get(name)

    # Groups

    def create_group(self, group: GroupConfig) -> GroupConfig:
        validate_group(group)
        with self._lock:
            if group.name in self.groups:
                raise MetadataError("exists", f"group {group.name!r} already exists")
            group.create_time_ms = group.update_time_ms = _now_ms()
            self.groups[group.name] = group
            self._save()
            return group

    def update_group(self, name: str, changes: dict[str, Any]) -> GroupConfig:
        with self._lock:
            current = self.groups.get(name)
            if current is None:
                raise MetadataError("not_found", f"group {name!r} not found")
            updated = dataclasses.replace(current, **changes)
            validate_group(updated)
            updated.update_time_ms = _now_ms()
            self.groups[name] = updated
            self._save()
            return updated

    def delete_group(self, name: str) -> None:
        with self._lock:
            if self.groups.pop(name, None) is None:
                raise MetadataError("not_found", f"group {name!r} not found")
            self._save()

    def get_group(self, name: str) -> GroupConfig | None:
        return self.groups.get(name)

    # Security configuration (read side for the enforcement on the data path)

    def access_key(self, access_key: str) -> AccessKeyConfig | None:
        return self.security.access_key(access_key)

    def acls_for(self, namespace: str) -> list[AclConfig]:
        return self.security.acls_for(namespace)

    def quota_for(self, namespace: str, topic: str | None = None, group: str | None = None) -> dict[str, int]:
        return self.security.quota_for(namespace, topic, group)
