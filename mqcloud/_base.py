"""What every client shares: routes, one Telemetry session per broker endpoint, heartbeats,
periodic route and settings refresh, and a clean shutdown (NotifyClientTermination)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
import socket
from collections.abc import Coroutine, Iterable
from typing import Any

from google.protobuf.duration_pb2 import Duration

from mqcloud._rpc import RpcClient, new_client_id
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.config import ClientConfig, endpoints_key
from mqcloud.errors import ClientClosedError, MQClientError
from mqcloud.route import ROUTE_REFRESH_SECONDS, RouteCache, TopicRoute
from mqcloud.signing import SDK_VERSION
from mqcloud.telemetry import TelemetrySession

__all__ = ("BaseClient", "duration")

log = logging.getLogger("mqcloud.client")
HEARTBEAT_SECONDS = 10.0
SETTINGS_SYNC_SECONDS = 300.0


def duration(seconds: float) -> Duration:
    d = Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


class BaseClient:
    client_type: int = pb.ClientType.CLIENT_TYPE_UNSPECIFIED
    #: how long start() waits for each endpoint's settings reply
    settings_wait: float = 3.0

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id = new_client_id()
        self._rpc: RpcClient | None = None
        self._routes: RouteCache | None = None
        self._sessions: dict[str, TelemetrySession] = {}
        self._tasks: list[asyncio.Task[Any]] = []
        self._started = False
        self._closed = False

    # --- subclass hooks ---------------------------------------------------------------------
    def _initial_topics(self) -> Iterable[str]:
        return ()

    def _settings(self) -> pb.Settings:
        raise NotImplementedError

    def _apply_settings(self, settings: pb.Settings) -> None:
        pass

    def _orphan_handler(self) -> Any:
        """Producers with a transaction checker answer the broker's orphaned-transaction checks."""
        return None

    def _group(self) -> pb.Resource | None:
        return None

    # --- helpers ----------------------------------------------------------------------------
    def resource(self, name: str) -> pb.Resource:
        return pb.Resource(resource_namespace=self.config.namespace, name=name)

    def _base_settings(self) -> pb.Settings:
        return pb.Settings(
            client_type=self.client_type,  # type: ignore[arg-type]
            access_point=self.config.access_point(),
            request_timeout=duration(self.config.request_timeout),
            user_agent=pb.UA(
                language=pb.Language.PYTHON,
                version=SDK_VERSION,
                platform=platform.platform(),
                hostname=socket.gethostname(),
            ),
        )

    @property
    def rpc(self) -> RpcClient:
        if self._rpc is None or self._closed:
            raise ClientClosedError("client is not started (call start()) or was shut down")
        return self._rpc

    @property
    def routes(self) -> RouteCache:
        if self._routes is None or self._closed:
            raise ClientClosedError("client is not started (call start()) or was shut down")
        return self._routes

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.append(task)
        return task

    # --- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._rpc = RpcClient(self.config, self.client_id)
        self._routes = RouteCache(self.config, self._rpc)
        self._started = True
        try:
            for topic in self._initial_topics():
                await self._route(topic)
        except BaseException:
            await self.shutdown()
            raise
        self._spawn(self._heartbeat_loop())
        self._spawn(self._refresh_loop())

    async def _route(self, topic: str) -> TopicRoute:
        route = await self.routes.get(topic)
        await self._ensure_sessions(route.endpoints())
        return route

    async def _ensure_sessions(self, endpoints: Iterable[str]) -> None:
        new = []
        for ep in endpoints:
            if ep and ep not in self._sessions:
                session = TelemetrySession(
                    self.rpc, ep, self._settings, self._apply_settings, self._orphan_handler()
                )
                self._sessions[ep] = session
                new.append(session.start(self.settings_wait))
        if new:
            await asyncio.gather(*new)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            await self.heartbeat()

    async def heartbeat(self) -> None:
        req = svc.HeartbeatRequest(client_type=self.client_type)  # type: ignore[arg-type]
        group = self._group()
        if group is not None:
            req.group.CopyFrom(group)
        for ep in list(self._sessions):
            with contextlib.suppress(MQClientError):
                await self.rpc.unary(ep, "Heartbeat", req)

    async def _refresh_loop(self) -> None:
        since_settings = 0.0
        while True:
            await asyncio.sleep(ROUTE_REFRESH_SECONDS)
            await self.routes.refresh_all()
            for route in self.routes.cached().values():
                await self._ensure_sessions(route.endpoints())
            since_settings += ROUTE_REFRESH_SECONDS
            if since_settings >= SETTINGS_SYNC_SECONDS:
                since_settings = 0.0
                for s in list(self._sessions.values()):
                    await s.sync_settings()

    async def shutdown(self) -> None:
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        current = asyncio.current_task()
        for t in self._tasks:
            if t is not current:
                t.cancel()
        await asyncio.gather(*(t for t in self._tasks if t is not current), return_exceptions=True)
        rpc = self._rpc
        assert rpc is not None
        req = svc.NotifyClientTerminationRequest()
        group = self._group()
        if group is not None:
            req.group.CopyFrom(group)
        for ep, session in list(self._sessions.items()):
            with contextlib.suppress(MQClientError):
                await rpc.unary(ep, "NotifyClientTermination", req, deadline=1.0)
            await session.close()
        self._sessions.clear()
        await rpc.close()

    async def __aenter__(self) -> Any:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()


def endpoint_of(queue: pb.MessageQueue) -> str:
    return endpoints_key(queue.broker.endpoints)
