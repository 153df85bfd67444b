"""Registry of connected clients, fed by request headers, Telemetry settings and heartbeats.

Each client with an open Telemetry stream keeps an outbound queue here, so the broker can push
commands (orphaned-transaction checks, reconnects) to it later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterable

from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("ClientRegistry", "ClientSession", "header")

CLIENT_ID_HEADER = "x-mq-client-id"
LANGUAGE_HEADER = "x-mq-language"
VERSION_HEADER = "x-mq-client-version"
# A client that sent nothing for this long is forgotten (clients heartbeat every 10 s).
_EXPIRE_MS = 120_000


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def header(metadata: Iterable[tuple[str, str | bytes]] | None, name: str) -> str:
    for key, value in metadata or ():
        if key == name:
            return value.decode(errors="replace") if isinstance(value, bytes) else value
    return ""


@dataclasses.dataclass(slots=True)
class ClientSession:
    client_id: str
    language: str = ""
    version: str = ""
    address: str = ""
    namespace: str = ""
    client_type: int = pb.ClientType.CLIENT_TYPE_UNSPECIFIED
    group: str = ""
    topics: set[str] = dataclasses.field(default_factory=set)
    settings: pb.Settings | None = None
    last_seen_ms: int = 0
    first_seen_ms: int = 0
    outbound: asyncio.Queue[svc.TelemetryCommand | None] | None = None


class ClientRegistry:
    def __init__(self) -> None:
        self._clients: dict[str, ClientSession] = {}

    def touch(self, metadata: Iterable[tuple[str, str | bytes]] | None, peer: str) -> ClientSession | None:
        """Record that a client made a call; returns its session (None without a client id)."""
        client_id = language = version = ""
        for key, value in metadata or ():  # one pass; most calls carry only a few headers
            if key == CLIENT_ID_HEADER:
                client_id = client_id or _text(value)
            elif key == LANGUAGE_HEADER:
                language = language or _text(value)
            elif key == VERSION_HEADER:
                version = version or _text(value)
        client_id = client_id[:256]
        if not client_id:
            return None
        session = self._clients.get(client_id)
        if session is None:
            session = self._clients[client_id] = ClientSession(client_id)
            session.first_seen_ms = int(time.time() * 1000)
        session.language = language[:32] or session.language
        session.version = version[:32] or session.version
        session.address = peer[:128]
        session.last_seen_ms = int(time.time() * 1000)
        return session

    def forget(self, client_id: str) -> None:
        session = self._clients.pop(client_id, None)
        if session is not None and session.outbound is not None:
            session.outbound.put_nowait(None)

    def sessions(self) -> list[ClientSession]:
        cutoff = int(time.time() * 1000) - _EXPIRE_MS
        for client_id in [c for c, s in self._clients.items() if s.last_seen_ms < cutoff and not s.outbound]:
            del self._clients[client_id]
        return list(self._clients.values())

    def get(self, client_id: str) -> ClientSession | None:
        return self._clients.get(client_id)

    def alive(self, client_id: str) -> bool:
        """Whether the client is still there: its Telemetry stream is open, or it made a call within
        the expiry (clients heartbeat every 10 s); not after NotifyClientTermination."""
        session = self._clients.get(client_id)
        if session is None:
            return False
        return session.outbound is not None or session.last_seen_ms >= int(time.time() * 1000) - _EXPIRE_MS

    def silent_since(self, client_id: str, since_ms: int) -> bool:
        """Whether the client has no Telemetry stream and made no call since ``since_ms`` (or is
        gone altogether)."""
        session = self._clients.get(client_id)
        return session is None or (session.outbound is None and session.last_seen_ms <= since_ms)

    def close_streams(self) -> None:
        """End every Telemetry stream (broker shutdown)."""
        for session in self._clients.values():
            if session.outbound is not None:
                session.outbound.put_nowait(None)
