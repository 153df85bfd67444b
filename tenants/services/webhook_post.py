"""POST an alert webhook, to public addresses only, checked on the address the request goes to.

Checking the URL's host and then letting an HTTP client resolve it again leaves a gap. The DNS
answer can change in between (rebinding: a public address for the check, 127.0.0.1 for the POST)
and turn a tenant's webhook into a request inside the platform's own network. Here each connection
resolves the host once. Every address it resolves to must be global, and the TCP connection goes to
one of those same addresses. TLS still checks the certificate against the URL's host name: httpcore
hands the name, not the address, to the TLS layer. Proxies from the environment and redirects are
not used: either would send the request somewhere not checked.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore

__all__ = ("NotPublic", "WebhookUnreachable", "post", "public_address")

# What httpcore raises for a request that did not get an answer (it has no common base class).
_FAILURES = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
)


class WebhookUnreachable(Exception):
    """The webhook got no HTTP answer; the message says why, for people."""


class NotPublic(httpcore.ConnectError):
    """The webhook host resolves to an address that is not global (loopback, private, link-local...)."""


def public_address(host: str, port: int) -> str:
    """The first address ``host`` resolves to; NotPublic when any address it resolves to is not global."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore.ConnectError(f"The webhook host {host!r} does not resolve: {exc}") from exc
    addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    for address in addresses:
        if not address.is_global:
            raise NotPublic(f"The webhook host {host!r} is not a public address ({address}).")
    if not addresses:
        raise httpcore.ConnectError(f"The webhook host {host!r} has no address.")
    return str(addresses[0])


class _PublicOnly(httpcore.SyncBackend):
    """Connects only to an address :func:`public_address` passed, from the same resolution."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return super().connect_tcp(public_address(host, port), port, timeout, local_address, socket_options)


def post(
    url: str, body: bytes, headers: dict[str, str], timeout_s: float, *, public_only: bool = True
) -> int:
    """POST ``body`` to ``url``; the HTTP status of the answer. ``public_only`` (the default) refuses
    hosts that resolve to non-global addresses. Raises WebhookUnreachable when no answer came."""
    backend = _PublicOnly() if public_only else httpcore.SyncBackend()
    timeouts = {"connect": timeout_s, "read": timeout_s, "write": timeout_s, "pool": timeout_s}
    extensions = {"timeout": timeouts}
    tls = ssl.create_default_context()
    try:
        with httpcore.ConnectionPool(ssl_context=tls, network_backend=backend) as pool:
            response = pool.request(
                "POST", url, headers=list(headers.items()), content=body, extensions=extensions
            )
    except NotPublic as exc:
        raise WebhookUnreachable(str(exc)) from exc
    except _FAILURES as exc:
        raise WebhookUnreachable(f"The webhook could not be reached: {exc or type(exc).__name__}") from exc
    return response.status
