"""Client configuration: endpoints, credentials, namespace, timeouts."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = ("ClientConfig", "Credentials", "parse_endpoints")


@dataclass(frozen=True)
class Credentials:
    """An access key pair; requests are signed with ``MQv2-HMAC-SHA1`` (see :mod:`mqcloud.signing`)."""

    access_key: str
    access_secret: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ClientConfig:
    """Where and how to connect.

    ``endpoints`` is the access point: ``host:port``, several separated by ``;``, with an optional
    ``http://``/``https://`` prefix. ``namespace`` is the tenant's namespace; it is put in every
    ``Resource.resource_namespace`` and the ``x-mq-namespace`` header. ``request_timeout`` is in
    seconds. ``tls`` uses TLS with the system roots.
    """

    endpoints: str
    credentials: Credentials | None = None
    namespace: str = ""
    request_timeout: float = 3.0
    tls: bool = False

    def access_point(self) -> pb.Endpoints:
        return to_pb_endpoints(parse_endpoints(self.endpoints))


def parse_endpoints(text: str) -> list[tuple[str, int]]:
    """``"a:1;b:2"`` → ``[("a", 1), ("b", 2)]``."""
    out: list[tuple[str, int]] = []
    for raw in text.split(";"):
        item = raw.strip()
        for prefix in ("http://", "https://"):
            if item.startswith(prefix):
                item = item[len(prefix) :]
        if not item:
            continue
        if item.startswith("["):  # [v6]:port
            host, _, port = item[1:].partition("]:")
        else:
            host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"endpoint {raw!r} must be host:port")
        out.append((host, int(port)))
    if not out:
        raise ValueError("no endpoints configured")
    return out


def to_pb_endpoints(addresses: list[tuple[str, int]]) -> pb.Endpoints:
    scheme = pb.AddressScheme.DOMAIN_NAME
    try:
        ip = ipaddress.ip_address(addresses[0][0])
        scheme = pb.AddressScheme.IPv4 if ip.version == 4 else pb.AddressScheme.IPv6
    except ValueError:
        pass
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=h, port=p) for h, p in addresses])


def endpoints_key(endpoints: pb.Endpoints) -> str:
    """A gRPC target for ``endpoints`` (the first address), used as the channel/fault key."""
    if not endpoints.addresses:
        return ""
    a = endpoints.addresses[0]
    # pb.IPv6, the module's plain int (pb.AddressScheme.IPv6 is a Python call): this runs per send
    host = f"[{a.host}]" if endpoints.scheme == pb.IPv6 else a.host
    return f"{host}:{a.port}"
