"""Topic routes: QueryRoute against the access point, cached, refreshed every 30 s."""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field

from mqcloud._rpc import RpcClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.config import ClientConfig, endpoints_key, parse_endpoints
from mqcloud.errors import MQClientError, check_status

__all__ = ("RouteCache", "TopicRoute")

ROUTE_REFRESH_SECONDS = 30.0
_WRITE = (pb.Permission.WRITE, pb.Permission.READ_WRITE)
_READ = (pb.Permission.READ, pb.Permission.READ_WRITE)


@dataclass
class TopicRoute:
    topic: str
    queues: list[pb.MessageQueue]
    fetched_at: float = field(default_factory=time.monotonic)
    # a producer's writable queues per (message type, validated), Producer._queues_for, filled on use
    typed_writable: dict[tuple[int, bool], list[pb.MessageQueue]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def writable(self) -> list[pb.MessageQueue]:
        """Queues on master brokers (id 0) that accept writes."""
        return [q for q in self.queues if q.permission in _WRITE and q.broker.id == 0]

    def readable(self) -> list[pb.MessageQueue]:
        return [q for q in self.queues if q.permission in _READ and q.broker.id == 0]

    def endpoints(self) -> frozenset[str]:
        return self._endpoints

    @functools.cached_property
    def _endpoints(self) -> frozenset[str]:
        # asked on every send; a route is replaced, never changed, when it is refreshed
        return frozenset(
            endpoints_key(q.broker.endpoints) for q in self.queues if q.broker.endpoints.addresses
        )


class RouteCache:
    def __init__(self, config: ClientConfig, rpc: RpcClient) -> None:
        self._config = config
        self._rpc = rpc
        self._routes: dict[str, TopicRoute] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._access_points = [f"{h}:{p}" for h, p in parse_endpoints(config.endpoints)]

    def cached(self) -> dict[str, TopicRoute]:
        return dict(self._routes)

    def peek(self, topic: str) -> TopicRoute | None:
        """The cached route of ``topic``, None before it was first asked for. Safe from any thread:
        the loop replaces a route whole, so a reader sees the old one or the new one."""
        return self._routes.get(topic)

    async def get(self, topic: str) -> TopicRoute:
        route = self._routes.get(topic)
        if route is not None:
            return route
        lock = self._locks.setdefault(topic, asyncio.Lock())
        async with lock:
            route = self._routes.get(topic)
            if route is None:
                route = await self.fetch(topic)
        return route

    async def fetch(self, topic: str) -> TopicRoute:
        """QueryRoute at the access point (each configured address in turn until one answers)."""
        req = svc.QueryRouteRequest(
            topic=pb.Resource(resource_namespace=self._config.namespace, name=topic),
            endpoints=self._config.access_point(),
        )
        last: MQClientError | None = None
        for ap in self._access_points:
            try:
                resp = await self._rpc.unary(ap, "QueryRoute", req)
            except MQClientError as e:
                last = e
                continue
            check_status(resp.status)
            route = TopicRoute(topic, list(resp.message_queues))
            self._routes[topic] = route
            return route
        assert last is not None
        raise last

    async def refresh_all(self) -> None:
        for topic in list(self._routes):
            try:
                await self.fetch(topic)
            except MQClientError:
                pass  # keep serving the old route
