"""Authentication (``MQv2-HMAC-SHA1`` against pushed access keys) and authorization (tenant
namespace + ACL 2.0) of v2 requests. Enforced by ``dataplane.interceptors``; see docs/security.md."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import unquote

from dataplane.auth.acl import Access, evaluate
from dataplane.auth.resources import Touch
from dataplane.auth.signature import SignatureError, parse_authorization, verify_signature
from dataplane.errors import BrokerError, Forbidden
from dataplane.security_store import AclConfig, SecurityStore
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = ("Authenticator", "Principal", "Unauthorized", "peer_ip")

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
_CACHE_MAX = 10_000


class Unauthorized(BrokerError):
    code = pb.Code.UNAUTHORIZED


@dataclasses.dataclass(slots=True, frozen=True)
class Principal:
    access_key: str
    namespace: str


def peer_ip(peer: str) -> str:
    """``ipv4:1.2.3.4:5`` / ``ipv6:[::1]:5`` (maybe %-encoded) -> the address; "" if unknown."""
    kind, _, rest = unquote(peer).partition(":")
    if kind not in ("ipv4", "ipv6"):
        return ""
    return rest.rpartition(":")[0].strip("[]")


class Authenticator:
    """Verifies signatures and namespace/ACL rules from the local cache (no control-plane call)."""

    def __init__(
        self, security: SecurityStore, *, dev_mode: bool, clock: Callable[[], float] = time.time
    ) -> None:
        self.security = security
        self.dev_mode = dev_mode
        self._clock = clock
        # (access key, date, signature, secret) of signatures already verified: one HMAC per
        # client per second instead of one per call. The secret is part of the key so a rotated
        # secret never matches an old entry.
        self._verified: set[tuple[str, str, str, str]] = set()
        self._policies: dict[str, tuple[AclConfig, ...]] = {}
        self._policies_version = -1

    def authenticate(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> Principal | None:
        """The caller's principal; None for an anonymous caller in development mode."""
        authorization = date_time = ""
        for name, value in metadata or ():
            if name == AUTHORIZATION:
                authorization = value.decode(errors="replace") if isinstance(value, bytes) else value
            elif name == DATE_TIME:
                date_time = value.decode(errors="replace") if isinstance(value, bytes) else value
        if not authorization:
            self._anonymous()
            return None
        try:
            header = parse_authorization(authorization)
        except SignatureError as exc:
            raise Unauthorized(str(exc)) from exc
        if not header.access_key:  # the Python client sends "Credential=" without credentials
            self._anonymous()
            return None
        ak = header.access_key[:128]
        key = self.security.access_key(ak)
        if key is None:
            raise Unauthorized(f"unknown access key {ak!r}")
        if not key.is_usable(int(self._clock() * 1000)):
            raise Unauthorized(f"access key {ak!r} is revoked or expired")
        if not date_time:
            raise Unauthorized("the signed x-mq-date-time header is missing")
        cache_key = (ak, date_time, header.signature, key.secret_key)
        if cache_key not in self._verified:
            if not verify_signature(key.secret_key, date_time, header.signature):
                raise Unauthorized(f"signature mismatch for access key {ak!r} (wrong secret?)")
            if len(self._verified) >= _CACHE_MAX:
                self._verified.clear()
            self._verified.add(cache_key)
        return Principal(ak, key.namespace)

    def _anonymous(self) -> None:
        if not self.dev_mode:
            raise Unauthorized("credentials required: sign requests with an access key (MQv2-HMAC-SHA1)")

    def policies(self, namespace: str) -> Sequence[AclConfig]:
        version = self.security.version
        if version != self._policies_version:
            self._policies.clear()
            self._policies_version = version
        found = self._policies.get(namespace)
        if found is None:
            found = self._policies[namespace] = tuple(self.security.acls_for(namespace))
        return found

    def authorize(
        self, principal: Principal | None, touches: Iterable[Touch], header_ns: str, peer: str
    ) -> str:
        """Refuse (FORBIDDEN) anything outside the key's namespace or its ACLs; returns the tenant."""
        if principal is None:
            tenant = header_ns
            for _, resource, _ in touches:
                tenant = resource.resource_namespace or tenant
            return tenant
        own = principal.namespace
        if header_ns and header_ns != own:
            raise Forbidden(
                f"access key {principal.access_key!r} belongs to namespace {own!r}, not {header_ns!r}"
            )
        policies: Sequence[AclConfig] | None = None
        ip = ""
        for rtype, resource, actions in touches:
            ns = resource.resource_namespace or header_ns
            if ns != own:
                raise Forbidden(
                    f"access key {principal.access_key!r} of namespace {own!r} cannot access "
                    f"{rtype.value.lower()} {resource.name!r} of namespace {ns!r}"
                )
            if not resource.name:
                continue
            if policies is None:
                policies = self.policies(own)
                ip = peer_ip(peer)
            if not policies:
                continue
            decision = evaluate(policies, principal.access_key, Access(rtype, resource.name, actions), ip)
            if not decision.allowed:
                raise Forbidden(decision.reason)
        return own
