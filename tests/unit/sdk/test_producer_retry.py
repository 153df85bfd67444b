"""Producer retries and fault avoidance, with the RPC layer replaced by a fake (no network).

Each send test runs twice: through :class:`AsyncProducer`, and through the blocking
:class:`Producer`'s calls on the caller's thread (``Producer._send_here``), which carry out the same
attempts with gRPC's blocking API."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from mqcloud import (
    AsyncProducer,
    ClientConfig,
    Message,
    Producer,
    SendReceipt,
    TooManyRequestsError,
    TransportError,
)
from mqcloud._loop import LoopThread
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.route import TopicRoute


def _queue(broker: str, host: str, qid: int) -> pb.MessageQueue:
    return pb.MessageQueue(
        topic=pb.Resource(name="t"),
        id=qid,
        permission=pb.Permission.READ_WRITE,
        accept_message_types=[pb.MessageType.NORMAL, pb.MessageType.FIFO],
        broker=pb.Broker(
            name=broker,
            id=0,
            endpoints=pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=1)]),
        ),
    )


class FakeRpc:
    def __init__(self, failing: set[str], error: Exception | None = None) -> None:
        self.failing = failing
        self.error = error
        self.calls: list[str] = []

    async def unary(self, endpoint: str, method: str, request: Any, deadline: float | None = None) -> Any:
        return self.call(endpoint, request)

    def call(self, endpoint: str, request: Any) -> Any:
        self.calls.append(endpoint)
        if endpoint in self.failing:
            raise self.error or TransportError("down", "UNAVAILABLE")
        return svc.SendMessageResponse(
            status=pb.Status(code=pb.Code.OK),
            entries=[
                svc.SendResultEntry(
                    status=pb.Status(code=pb.Code.OK), message_id=m.system_properties.message_id, offset=7
                )
                for m in request.messages
            ],
        )


class FakeRoutes:
    """``get`` answers the cached route; ``fetch`` (a fresh QueryRoute) answers ``fresh`` when set."""

    def __init__(self, route: TopicRoute) -> None:
        self.route = route
        self.fresh: TopicRoute | None = None
        self.fetches = 0

    async def get(self, topic: str) -> TopicRoute:
        return self.route

    def peek(self, topic: str) -> TopicRoute | None:
        return self.route

    async def fetch(self, topic: str) -> TopicRoute:
        self.fetches += 1
        if self.fresh is not None:
            self.route = self.fresh
        return self.route


class BlockingFakeRpc:
    """The blocking producer's channels (``mqcloud._blocking_rpc.BlockingRpc``), answered by ``rpc``."""

    def __init__(self, rpc: FakeRpc) -> None:
        self.rpc = rpc

    def unary(self, endpoint: str, method: str, request: Any, deadline: float | None = None) -> Any:
        return self.rpc.call(endpoint, request)


Send = Callable[[AsyncProducer, Message], Awaitable[SendReceipt]]


@pytest.fixture(params=["asyncio", "blocking"])
def send(request: pytest.FixtureRequest) -> Iterator[Send]:
    """Send through the asyncio producer, or through a blocking :class:`Producer` over it."""
    blocking: dict[int, Producer] = {}  # one per asyncio producer

    async def through(p: AsyncProducer, message: Message) -> SendReceipt:
        if request.param == "asyncio":
            return await p.send(message)
        if id(p) not in blocking:
            wrapper = blocking[id(p)] = Producer(p.config)
            wrapper._core = p
            wrapper._loop = LoopThread("test-producer")  # answers the retries' route questions
            wrapper._calls = BlockingFakeRpc(p._rpc)  # type: ignore[arg-type,assignment]
        return blocking[id(p)].send(message)

    yield through
    for wrapper in blocking.values():
        assert wrapper._loop is not None
        wrapper._loop.stop()


def _producer(rpc: FakeRpc) -> AsyncProducer:
    p = AsyncProducer(ClientConfig("127.0.0.1:1"), max_attempts=3)
    route = TopicRoute("t", [_queue("b1", "10.0.0.1", 0), _queue("b2", "10.0.0.2", 0)])
    p._rpc = rpc  # type: ignore[assignment]
    p._routes = FakeRoutes(route)  # type: ignore[assignment]
    p._started = True

    async def no_sessions(endpoints: Any) -> None:
        return None

    p._ensure_sessions = no_sessions  # type: ignore[method-assign]
    return p


async def test_retry_moves_to_another_broker_and_avoids_the_failed_one(send: Send) -> None:
    rpc = FakeRpc({"10.0.0.1:1"})
    p = _producer(rpc)
    r = await send(p, Message("t", b"x"))
    assert r.endpoint == "10.0.0.2:1"
    assert rpc.calls == ["10.0.0.1:1", "10.0.0.2:1"]
    assert not p.fault.is_available("10.0.0.1:1")
    rpc.calls.clear()
    for _ in range(4):  # round-robin would hit b1 half the time; fault avoidance skips it
        await send(p, Message("t", b"x"))
    assert rpc.calls == ["10.0.0.2:1"] * 4


async def test_gives_up_after_max_attempts(send: Send) -> None:
    rpc = FakeRpc({"10.0.0.1:1", "10.0.0.2:1"})
    p = _producer(rpc)
    with pytest.raises(TransportError):
        await send(p, Message("t", b"x"))
    assert len(rpc.calls) == 3


async def test_non_retriable_error_is_not_retried(send: Send) -> None:
    from mqcloud.errors import error_for_code

    rpc = FakeRpc({"10.0.0.1:1", "10.0.0.2:1"}, error_for_code(40402, "no topic"))
    p = _producer(rpc)
    with pytest.raises(Exception, match="no topic"):
        await send(p, Message("t", b"x"))
    assert len(rpc.calls) == 1


async def test_throttled_send_is_retried_with_backoff(send: Send) -> None:
    rpc = FakeRpc({"10.0.0.1:1"}, TooManyRequestsError("slow down", 42900))
    p = _producer(rpc)
    assert (await send(p, Message("t", b"x"))).endpoint == "10.0.0.2:1"


async def test_fifo_messages_stick_to_their_queue(send: Send) -> None:
    rpc = FakeRpc(set())
    p = _producer(rpc)
    endpoints = {(await send(p, Message("t", b"x", message_group="g1"))).endpoint for _ in range(5)}
    assert len(endpoints) == 1


async def test_a_failed_over_master_is_found_by_asking_for_the_route_again(send: Send) -> None:
    """HA: the only broker group's master dies; its replica is promoted and the access point's
    route names it. The retry goes there at once, not after the periodic route refresh."""
    from mqcloud.errors import error_for_code

    rpc = FakeRpc({"10.0.0.1:1"}, error_for_code(pb.Code.HA_NOT_AVAILABLE, "this node is a replica"))
    p = AsyncProducer(ClientConfig("127.0.0.1:1"), max_attempts=3)
    routes = FakeRoutes(TopicRoute("t", [_queue("g", "10.0.0.1", 0)]))
    routes.fresh = TopicRoute("t", [_queue("g", "10.0.0.3", 0)])
    p._rpc = rpc  # type: ignore[assignment]
    p._routes = routes  # type: ignore[assignment]
    p._started = True

    async def no_sessions(endpoints: Any) -> None:
        return None

    p._ensure_sessions = no_sessions  # type: ignore[method-assign]
    r = await send(p, Message("t", b"x"))
    assert r.endpoint == "10.0.0.3:1"
    assert rpc.calls == ["10.0.0.1:1", "10.0.0.3:1"] and routes.fetches == 1


def test_writable_queues_per_type_are_kept_on_the_route_and_follow_the_validation_setting() -> None:
    p = AsyncProducer(ClientConfig("127.0.0.1:1"))
    fifo_only = _queue("b1", "10.0.0.1", 1)
    del fifo_only.accept_message_types[:]
    fifo_only.accept_message_types.append(pb.MessageType.FIFO)
    general = _queue("b1", "10.0.0.1", 0)
    route = TopicRoute("t", [general, fifo_only])
    normal = pb.MessageType.NORMAL
    assert p._queues_for("t", route, normal) == [general]
    assert p._queues_for("t", route, normal) is p._queues_for("t", route, normal)  # kept, not rebuilt
    p.validate_message_type = False  # the broker's settings turned validation off
    assert p._queues_for("t", route, normal) == [general, fifo_only]
    assert route.endpoints() == {"10.0.0.1:1"}
