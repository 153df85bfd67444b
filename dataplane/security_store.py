"""Access keys, ACL policies and quotas pushed by the control plane, persisted in the data dir.

Everything lives in ``{data_dir}/security.json``, created with mode 0600 because it holds the
plain access-key secrets (the broker needs them to verify HMAC signatures). Writes are atomic
(temp file, fsync, rename, fsync of the directory), as for ``metadata.json``.

This module only stores and validates; enforcement on the data path reads it through
:meth:`SecurityStore.access_key`, :meth:`SecurityStore.acls_for` and :meth:`SecurityStore.quota_for`.
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import json
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from mqcloud.admin_client import QUOTA_LIMITS

__all__ = (
    "QUOTA_LIMITS",
    "AccessKeyConfig",
    "AccessKeyStatus",
    "AclAction",
    "AclConfig",
    "AclDecision",
    "AclPatternType",
    "AclResourceType",
    "QuotaConfig",
    "SecurityConfigError",
    "SecurityStore",
)

logger = logging.getLogger(__name__)

FILE_NAME = "security.json"
FILE_MODE = 0o600
_NAMESPACE = re.compile(r"^[A-Za-z0-9_-]{1,127}$")
_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_RESOURCE = re.compile(r"^[A-Za-z0-9_*-]{0,127}$")
_MAX_SECRET = 512
_MAX_CIDRS = 64


class SecurityConfigError(Exception):
    """Security configuration refused; ``kind`` is invalid / not_found / exists (as MetadataError)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class AccessKeyStatus(enum.StrEnum):
    ACTIVE = "active"
    REVOKED = "revoked"


class AclResourceType(enum.StrEnum):
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class AclPatternType(enum.StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class AclAction(enum.StrEnum):
    ALL = "All"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class AclDecision(enum.StrEnum):
    ALLOW = "Allow"
    DENY = "Deny"


@dataclasses.dataclass(slots=True, frozen=True)
class AccessKeyConfig:
    access_key: str
    secret_key: str = dataclasses.field(repr=False)
    namespace: str
    status: AccessKeyStatus = AccessKeyStatus.ACTIVE
    expires_at_ms: int = 0  # 0: never
    create_time_ms: int = 0
    update_time_ms: int = 0

    def is_usable(self, now_ms: int | None = None) -> bool:
        """Whether a signature made with this key may be accepted at ``now_ms``."""
        if self.status != AccessKeyStatus.ACTIVE:
            return False
        now = _now_ms() if now_ms is None else now_ms
        return self.expires_at_ms == 0 or now < self.expires_at_ms


@dataclasses.dataclass(slots=True, frozen=True)
class AclConfig:
    """One ACL 2.0 entry of a namespace; ``resource_pattern`` is tenant-relative."""

    name: str
    namespace: str
    principal: str
    resource_type: AclResourceType
    resource_pattern: str = ""
    pattern_type: AclPatternType = AclPatternType.LITERAL
    actions: tuple[AclAction, ...] = ()
    source_cidrs: tuple[str, ...] = ()
    decision: AclDecision = AclDecision.ALLOW
    create_time_ms: int = 0
    update_time_ms: int = 0


@dataclasses.dataclass(slots=True, frozen=True)
class QuotaConfig:
    """Limits of a namespace, or of one qualified topic or group of it; absent limits inherit."""

    namespace: str
    topic: str = ""
    group: str = ""
    limits: Mapping[str, int] = dataclasses.field(default_factory=dict)
    create_time_ms: int = 0
    update_time_ms: int = 0

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.topic, self.group)


_Config = TypeVar("_Config", AccessKeyConfig, AclConfig, QuotaConfig)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _invalid(message: str) -> SecurityConfigError:
    return SecurityConfigError("invalid", message)


def _check_namespace(namespace: str) -> None:
    if not _NAMESPACE.match(namespace):
        raise _invalid(f"namespace {namespace!r} is required and must match [A-Za-z0-9_-]{{1,127}}")


def validate_access_key(key: AccessKeyConfig) -> None:
    if not _KEY_ID.match(key.access_key):
        raise _invalid(f"access_key {key.access_key!r} must match [A-Za-z0-9_.-]{{1,128}}")
    _check_namespace(key.namespace)
    if not key.secret_key or len(key.secret_key) > _MAX_SECRET:
        raise _invalid(f"secret_key is required (at most {_MAX_SECRET} characters)")
    if key.expires_at_ms < 0:
        raise _invalid("expires_at_ms must be >= 0 (0: never)")


def validate_acl(acl: AclConfig) -> None:
    if not _KEY_ID.match(acl.name):
        raise _invalid(f"ACL name {acl.name!r} must match [A-Za-z0-9_.-]{{1,128}}")
    _check_namespace(acl.namespace)
    if acl.principal != "*" and not _KEY_ID.match(acl.principal):
        raise _invalid(f"principal {acl.principal!r} must be an access key or '*'")
    if not _RESOURCE.match(acl.resource_pattern):
        raise _invalid(
            f"resource_pattern {acl.resource_pattern!r} must be a tenant-relative name "
            "([A-Za-z0-9_*-], no '%'), empty or '*'"
        )
    if not acl.actions:
        raise _invalid("an ACL needs at least one action")
    if len(acl.source_cidrs) > _MAX_CIDRS:
        raise _invalid(f"at most {_MAX_CIDRS} source_cidrs")


def _normalise_cidrs(cidrs: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for cidr in cidrs:
        try:
            out.append(str(ipaddress.ip_network(cidr.strip(), strict=False)))
        except ValueError as exc:
            raise _invalid(f"source_cidrs: {cidr!r} is not an IP network ({exc})") from exc
    return tuple(dict.fromkeys(out))


def validate_quota(quota: QuotaConfig) -> None:
    _check_namespace(quota.namespace)
    if quota.topic and quota.group:
        raise _invalid("a quota applies to a namespace, a topic or a group, not both a topic and a group")
    for name in (quota.topic, quota.group):
        if name and not name.startswith(f"{quota.namespace}%"):
            raise _invalid(f"{name!r} is not a qualified name in namespace {quota.namespace!r}")
    for field, value in quota.limits.items():
        if field not in QUOTA_LIMITS:
            raise _invalid(f"unknown quota limit {field!r}")
        if value < 0:
            raise _invalid(f"quota limit {field} must be >= 0, got {value}")


def _write_private_json(path: Path, data: Any) -> None:
    """Atomically replace ``path`` with ``data``; the file is 0600 from its first byte."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # an older tmp file may have been created with another mode
        with os.fdopen(fd, "w") as f:
            fd = -1
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
    finally:
        if fd >= 0:
            os.close(fd)
    tmp.replace(path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class SecurityStore:
    """Thread-safe, persisted access keys, ACLs and quotas; puts are idempotent upserts."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / FILE_NAME
        self._lock = threading.Lock()
        self.access_keys: dict[str, AccessKeyConfig] = {}
        self.acls: dict[tuple[str, str], AclConfig] = {}
        self.quotas: dict[tuple[str, str, str], QuotaConfig] = {}
        # Bumped on every change, so readers can cache what they derive (e.g. ACLs per namespace).
        self.version = 0
        self._load()

    def _load(self) -> None:
        if not self._path.exists():
            return
        mode = stat.S_IMODE(self._path.stat().st_mode)
        if mode != FILE_MODE:
            logger.warning("%s had mode %o; set to 0600", self._path, mode)
            self._path.chmod(FILE_MODE)
        raw = json.loads(self._path.read_text())
        for item in raw.get("access_keys", []):
            item["status"] = AccessKeyStatus(item["status"])
            key = AccessKeyConfig(**item)
            self.access_keys[key.access_key] = key
        for item in raw.get("acls", []):
            item["resource_type"] = AclResourceType(item["resource_type"])
            item["pattern_type"] = AclPatternType(item["pattern_type"])
            item["actions"] = tuple(AclAction(x) for x in item["actions"])
            item["source_cidrs"] = tuple(item["source_cidrs"])
            item["decision"] = AclDecision(item["decision"])
            acl = AclConfig(**item)
            self.acls[(acl.namespace, acl.name)] = acl
        for item in raw.get("quotas", []):
            quota = QuotaConfig(**item)
            self.quotas[quota.key] = quota

    def _save(self) -> None:
        self.version += 1
        data = {
            "version": 1,
            "access_keys": [dataclasses.asdict(k) for k in self.access_keys.values()],
            "acls": [dataclasses.asdict(a) for a in self.acls.values()],
            "quotas": [{**dataclasses.asdict(q), "limits": dict(q.limits)} for q in self.quotas.values()],
        }
        _write_private_json(self._path, data)

    # Access keys

    def put_access_key(self, key: AccessKeyConfig) -> AccessKeyConfig:
        """Create or replace a key; a key id already owned by another namespace is refused."""
        validate_access_key(key)
        with self._lock:
            current = self.access_keys.get(key.access_key)
            if current is not None and current.namespace != key.namespace:
                raise SecurityConfigError(
                    "exists", f"access key {key.access_key!r} belongs to another namespace"
                )
            stored = _stamp(key, current)
            if stored != current:
                self.access_keys[key.access_key] = stored
                self._save()
            return stored

    def delete_access_key(self, access_key: str, namespace: str = "") -> None:
        with self._lock:
            current = self.access_keys.get(access_key)
            if current is None or (namespace and current.namespace != namespace):
                raise SecurityConfigError("not_found", f"access key {access_key!r} not found")
            del self.access_keys[access_key]
            self._save()

    def list_access_keys(self, namespace: str = "") -> list[AccessKeyConfig]:
        keys = sorted(self.access_keys.values(), key=lambda k: k.access_key)
        return [k for k in keys if not namespace or k.namespace == namespace]

    def access_key(self, access_key: str) -> AccessKeyConfig | None:
        """The key as pushed (check ``is_usable()`` before trusting a signature), or None."""
        return self.access_keys.get(access_key)

    # ACLs

    def put_acl(self, acl: AclConfig) -> AclConfig:
        validate_acl(acl)
        acl = dataclasses.replace(
            acl,
            actions=tuple(dict.fromkeys(acl.actions)),
            source_cidrs=_normalise_cidrs(acl.source_cidrs),
            resource_pattern="" if acl.resource_pattern == "*" else acl.resource_pattern,
        )
        with self._lock:
            current = self.acls.get((acl.namespace, acl.name))
            stored = _stamp(acl, current)
            if stored != current:
                self.acls[(acl.namespace, acl.name)] = stored
                self._save()
            return stored

    def delete_acl(self, namespace: str, name: str) -> None:
        with self._lock:
            if self.acls.pop((namespace, name), None) is None:
                raise SecurityConfigError("not_found", f"ACL {name!r} not found in namespace {namespace!r}")
            self._save()

    def list_acls(self, namespace: str = "") -> list[AclConfig]:
        acls = sorted(self.acls.values(), key=lambda a: (a.namespace, a.name))
        return [a for a in acls if not namespace or a.namespace == namespace]

    def acls_for(self, namespace: str) -> list[AclConfig]:
        """Every policy of the namespace (nothing of another namespace ever applies)."""
        return self.list_acls(namespace) if namespace else []

    # Quotas

    def put_quota(self, quota: QuotaConfig) -> QuotaConfig:
        """Replace the quota of its scope (namespace, namespace+topic or namespace+group)."""
        validate_quota(quota)
        with self._lock:
            current = self.quotas.get(quota.key)
            stored = _stamp(dataclasses.replace(quota, limits=dict(quota.limits)), current)
            if stored != current:
                self.quotas[quota.key] = stored
                self._save()
            return stored

    def delete_quota(self, namespace: str, topic: str = "", group: str = "") -> None:
        with self._lock:
            if self.quotas.pop((namespace, topic, group), None) is None:
                scope = topic or group or "the namespace"
                raise SecurityConfigError("not_found", f"no quota for {scope} in namespace {namespace!r}")
            self._save()

    def list_quotas(self, namespace: str = "") -> list[QuotaConfig]:
        quotas = sorted(self.quotas.values(), key=lambda q: q.key)
        return [q for q in quotas if not namespace or q.namespace == namespace]

    def quota_for(self, namespace: str, topic: str | None = None, group: str | None = None) -> dict[str, int]:
        """Limits in force: the namespace's, overlaid by the topic's or group's; absent = unlimited."""
        limits: dict[str, int] = {}
        base = self.quotas.get((namespace, "", ""))
        if base is not None:
            limits.update(base.limits)
        narrow = self.quotas.get((namespace, topic or "", group or "")) if topic or group else None
        if narrow is not None:
            limits.update(narrow.limits)
        return limits


def _stamp(new: _Config, current: _Config | None) -> _Config:
    """``new`` with the create time kept; ``current`` itself when nothing else changed."""
    if current is not None:
        same = dataclasses.replace(
            new, create_time_ms=current.create_time_ms, update_time_ms=current.update_time_ms
        )
        if same == current:
            return current
        return dataclasses.replace(new, create_time_ms=current.create_time_ms, update_time_ms=_now_ms())
    now = _now_ms()
    return dataclasses.replace(new, create_time_ms=now, update_time_ms=now)
