"""ACL 2.0 evaluation over the policies the control plane pushed (``SecurityStore`` cache).

Rules (documented in docs/security.md):

- Only the policies of the key's own namespace whose principal is the key or ``*`` apply.
- A policy matches an access when its resource type covers the resource (``Any``, ``Cluster`` and
  ``Namespace`` cover everything of the namespace; ``Topic``/``Group`` their kind), its pattern
  matches the tenant-relative name (LITERAL: equal, empty = every name; PREFIXED: starts with), one
  of its actions is the requested one (or ``All``), and the peer address is in one of its source
  CIDRs (none = anywhere).
- Deny before allow: a matching Deny refuses. Otherwise, once an Allow policy covering the kind of
  resource (topics or groups) applies to the key, the key is in allow-list mode for that kind and
  needs a matching Allow; without such policies the key has full access to that kind of resource
  in its own namespace (the tenant's default).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Sequence
from functools import lru_cache

from dataplane.security_store import AclAction, AclConfig, AclDecision, AclPatternType, AclResourceType

__all__ = ("Access", "Decision", "evaluate")

_COVERS_ALL = frozenset({AclResourceType.ANY, AclResourceType.CLUSTER, AclResourceType.NAMESPACE})
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclasses.dataclass(slots=True, frozen=True)
class Access:
    """What one request does to one resource; any of ``actions`` suffices (QueryRoute: Pub or Sub)."""

    resource_type: AclResourceType
    name: str  # tenant-relative
    actions: tuple[AclAction, ...]


@dataclasses.dataclass(slots=True, frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


@lru_cache(maxsize=4096)
def _network(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(cidr, strict=False)


@lru_cache(maxsize=4096)
def parse_ip(text: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _matches(policy: AclConfig, access: Access, action: AclAction, ip: IpAddress | None) -> bool:
    if policy.resource_type not in _COVERS_ALL and policy.resource_type != access.resource_type:
        return False
    pattern = policy.resource_pattern
    if pattern and policy.resource_type not in _COVERS_ALL:
        if policy.pattern_type == AclPatternType.PREFIXED:
            if not access.name.startswith(pattern):
                return False
        elif access.name != pattern:
            return False
    if action not in policy.actions and AclAction.ALL not in policy.actions:
        return False
    if policy.source_cidrs:
        if ip is None:
            return False
        return any(ip.version == _network(c).version and ip in _network(c) for c in policy.source_cidrs)
    return True


def evaluate(policies: Sequence[AclConfig], access_key: str, access: Access, peer_ip: str) -> Decision:
    """Whether ``access_key`` may do ``access`` from ``peer_ip`` under ``policies`` (one namespace)."""
    applicable = [p for p in policies if p.principal in ("*", access_key)]
    if not applicable:
        return Decision(True)
    ip = parse_ip(peer_ip) if any(p.source_cidrs for p in applicable) else None
    allow_list = any(
        p.decision == AclDecision.ALLOW
        and (p.resource_type in _COVERS_ALL or p.resource_type == access.resource_type)
        for p in applicable
    )
    what = f"{access.resource_type.value} {access.name!r}"
    for action in access.actions:
        denied = next(
            (p for p in applicable if p.decision == AclDecision.DENY and _matches(p, access, action, ip)),
            None,
        )
        if denied is not None:
            reason = f"ACL policy {denied.name} denies {action.value} on {what}"
            if len(access.actions) == 1:
                return Decision(False, reason)
            continue
        if not allow_list or any(
            p.decision == AclDecision.ALLOW and _matches(p, access, action, ip) for p in applicable
        ):
            return Decision(True)
    actions = "/".join(a.value for a in access.actions)
    return Decision(False, f"no ACL policy allows {access_key} {actions} on {what} from {peer_ip or '?'}")
