"""A bare grpc.aio MessagingService that accepts SendMessage and stores nothing.

It is the framework's ceiling for ``broker_bench.py``: the same requests, the same Python gRPC stack,
no broker work at all. ReceiveMessage streams ``batch_size`` copies of one prepared 1 KiB message
(status first, delivery timestamp last, as a broker does) and AckMessage answers OK for every entry,
so a consume run against it measures what streaming the responses alone costs. The stream is
written as the broker writes it (``dataplane.buffered_stream``: one socket write per receive).
It runs on the event loop a broker started in the same environment would (``MQ_BROKER_EVENT_LOOP``,
uvloop unless set), with the gRPC core switches such a broker sets (``MQ_BROKER_GRPC_EXPERIMENTS``,
dataplane/grpc_core.py), on the CPUs it would keep to (``MQ_BROKER_CPU_AFFINITY``) and with its
loop's and gRPC's polling thread kept together as it would keep them (``MQ_BROKER_LOOP_CPU``,
dataplane/loop_cpu.py), and it
registers its methods as the broker does (:func:`register`), so the two are measured on the same
stack.

With ``--relay`` it is the framework's floor for the end-to-end runs instead: SendMessage keeps the
messages it is sent in memory (in order, nothing on disk, no index, no POP state) and ReceiveMessage
hands them out, up to ``batch_size`` per call, long-polling until a send arrives or the client's
timeout runs out, as the broker does; it stamps each with a store timestamp as the broker does (the
wall clock in whole milliseconds, when its SendMessage took it). QueryRoute, Telemetry and Heartbeat
answer enough for the SDK's producer to send through it. So ``e2e_latency`` runs the same client
code against it as against the broker, and what it measures is what the two gRPC hops (send,
receive) cost on this machine.
Its receives' write times go into the broker's own histogram, ``mq_broker_receive_write_seconds``
(from the messages taken to the last response handed to gRPC, timed as the broker times its
receives), served on ``/metrics`` with ``--metrics PORT``: the write phase of the framework alone.
Run: ``python bench/bare_grpc_server.py PORT [--relay] [--metrics PORT]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import time
from collections.abc import AsyncIterator

from dataplane.config import BrokerSettings
from dataplane.cpu_affinity import apply_cpu_affinity
from dataplane.grpc_core import apply_experiments

# The gRPC core switches a broker node sets for itself, before grpc is imported, and the CPUs it
# keeps to (MQ_BROKER_CPU_AFFINITY, none unless set): the same stack.
_settings = BrokerSettings()
apply_experiments(_settings.grpc_experiments)
apply_cpu_affinity(_settings.cpu_affinity)

import grpc  # noqa: E402
from prometheus_client import start_http_server  # noqa: E402

from dataplane.event_loop import run_on  # noqa: E402
from dataplane.loop_cpu import apply_loop_cpu  # noqa: E402
from dataplane.metrics import RECEIVE_WRITE  # noqa: E402
from dataplane.wire import add_servicer  # noqa: E402
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb  # noqa: E402
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc  # noqa: E402
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc as svc_grpc  # noqa: E402


def prepared_message() -> pb.Message:
    """One received message as a broker streams it: 1 KiB body, ids, receipt handle, timestamps."""
    m = pb.Message(topic=pb.Resource(name="bench"), body=os.urandom(1024))
    sp = m.system_properties
    sp.tag = "bench"
    sp.message_id = "0" * 32
    sp.body_digest.type = pb.MD5
    sp.body_digest.checksum = "0" * 32
    sp.body_encoding = pb.IDENTITY
    sp.message_type = pb.NORMAL
    sp.born_host = "127.0.0.1"
    sp.store_host = "127.0.0.1:8081"
    sp.queue_id = 0
    sp.queue_offset = 0
    sp.receipt_handle = "x" * 120
    sp.delivery_attempt = 1
    sp.born_timestamp.GetCurrentTime()
    sp.store_timestamp.GetCurrentTime()
    sp.invisible_duration.FromSeconds(60)
    return m


def delivered_at() -> svc.ReceiveMessageResponse:
    """The last response of a receive's stream, as a broker ends it: the delivery timestamp."""
    done = svc.ReceiveMessageResponse()
    done.delivery_timestamp.GetCurrentTime()
    return done


class BareMessagingService(svc_grpc.MessagingServiceServicer):
    def __init__(self) -> None:
        self.received = svc.ReceiveMessageResponse(message=prepared_message())
        self.ok = pb.Status(code=pb.Code.OK, message="OK")

    async def ReceiveMessage(
        self, request: svc.ReceiveMessageRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[svc.ReceiveMessageResponse]:
        # registered as buffered: written as the broker writes its receives, the whole stream in one go
        yield svc.ReceiveMessageResponse(status=self.ok)
        for _ in range(request.batch_size or 32):
            yield self.received
        yield delivered_at()

    async def AckMessage(
        self, request: svc.AckMessageRequest, context: grpc.aio.ServicerContext
    ) -> svc.AckMessageResponse:
        ok = self.ok
        entries = [
            svc.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=ok)
            for e in request.entries
        ]
        return svc.AckMessageResponse(status=self.ok, entries=entries)

    async def SendMessage(
        self, request: svc.SendMessageRequest, context: grpc.aio.ServicerContext
    ) -> svc.SendMessageResponse:
        ok = pb.Status(code=pb.Code.OK, message="OK")
        entries = [
            svc.SendResultEntry(status=ok, message_id=m.system_properties.message_id, offset=i)
            for i, m in enumerate(request.messages)
        ]
        return svc.SendMessageResponse(status=ok, entries=entries)


class RelayMessagingService(BareMessagingService):
    """``--relay``: what is sent is kept in memory and handed to the next receives (no storage)."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port
        self.pending: collections.deque[pb.Message] = collections.deque()
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self.handles = 0
        self.writes = RECEIVE_WRITE.labels()

    async def SendMessage(
        self, request: svc.SendMessageRequest, context: grpc.aio.ServicerContext
    ) -> svc.SendMessageResponse:
        ok = self.ok
        entries = []
        stored_ms = time.time_ns() // 1_000_000  # a store timestamp as the broker's (whole ms)
        for m in request.messages:
            m.system_properties.store_timestamp.FromMilliseconds(stored_ms)
            self.pending.append(m)
            entries.append(svc.SendResultEntry(status=ok, message_id=m.system_properties.message_id))
        # one parked receive per batch of messages takes them (the broker wakes its long polls so)
        for _ in range(0, len(request.messages), 32):
            while self.waiting:
                waiter = self.waiting.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    break
        return svc.SendMessageResponse(status=ok, entries=entries)

    async def ReceiveMessage(
        self, request: svc.ReceiveMessageRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[svc.ReceiveMessageResponse]:
        if not self.pending:
            waiter = asyncio.get_running_loop().create_future()
            self.waiting.append(waiter)
            poll_s = request.long_polling_timeout.ToMilliseconds() / 1000 or 1.0
            try:
                await asyncio.wait_for(waiter, poll_s)
            except TimeoutError:
                pass
        taken = [self.pending.popleft() for _ in range(min(request.batch_size or 32, len(self.pending)))]
        if not taken:
            yield svc.ReceiveMessageResponse(status=pb.Status(code=pb.Code.MESSAGE_NOT_FOUND, message="none"))
            return
        started = time.perf_counter()  # as the broker's receive_message times its writes
        yield svc.ReceiveMessageResponse(status=self.ok)
        for m in taken:
            sp = m.system_properties
            self.handles += 1
            sp.receipt_handle = f"relay-{self.handles}"
            sp.delivery_attempt = 1
            yield svc.ReceiveMessageResponse(message=m)
        yield delivered_at()
        self.writes.observe(time.perf_counter() - started)

    async def QueryRoute(
        self, request: svc.QueryRouteRequest, context: grpc.aio.ServicerContext
    ) -> svc.QueryRouteResponse:
        endpoints = pb.Endpoints(
            scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=self.port)]
        )
        queues = [
            pb.MessageQueue(
                topic=request.topic,
                id=qid,
                permission=pb.Permission.READ_WRITE,
                broker=pb.Broker(name="relay", id=0, endpoints=endpoints),
                accept_message_types=[pb.NORMAL],
            )
            for qid in range(8)
        ]
        return svc.QueryRouteResponse(status=self.ok, message_queues=queues)

    async def Heartbeat(
        self, request: svc.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> svc.HeartbeatResponse:
        return svc.HeartbeatResponse(status=self.ok)

    async def Telemetry(
        self, requests: AsyncIterator[svc.TelemetryCommand], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[svc.TelemetryCommand]:
        async for command in requests:  # the settings handshake: the client's settings come back
            if command.WhichOneof("command") == "settings":
                yield svc.TelemetryCommand(status=self.ok, settings=command.settings)

    async def QueryOffset(
        self, request: svc.QueryOffsetRequest, context: grpc.aio.ServicerContext
    ) -> svc.QueryOffsetResponse:
        return svc.QueryOffsetResponse(status=self.ok, offset=0)

    async def UpdateOffset(
        self, request: svc.UpdateOffsetRequest, context: grpc.aio.ServicerContext
    ) -> svc.UpdateOffsetResponse:
        return svc.UpdateOffsetResponse(status=self.ok)


def register(servicer: BareMessagingService, server: grpc.aio.Server) -> None:
    """Register as the broker registers its service (``dataplane.wire.add_servicer``: one generic
    handler, requests decoded by the handler, ReceiveMessage written in one go). The generated
    ``add_MessagingServiceServicer_to_server`` registers every method as well, and grpc.aio's accept
    loop then waits on one pending request per registered method for every call: a ceiling below
    the framework's own."""
    add_servicer(
        server, servicer, svc.DESCRIPTOR.services_by_name["MessagingService"], buffered=("ReceiveMessage",)
    )


async def serve(port: int, relay: bool, metrics_port: int = 0) -> None:
    if metrics_port:
        start_http_server(metrics_port, addr="127.0.0.1")
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", 64 << 20),
            # as the broker (dataplane/server.py): queue a burst of calls rather than cancel them
            ("grpc.server.max_pending_requests", 10_000),
            ("grpc.server.max_pending_requests_hard_limit", 20_000),
        ]
    )
    register(RelayMessagingService(port) if relay else BareMessagingService(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    # the broker's threads as the broker keeps them (its loop_cpu setting): the same stack
    apply_loop_cpu(_settings.loop_cpu, asyncio.get_running_loop(), _settings.loop_cpu_placements)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser(description="The bench's bare gRPC server (see the module docstring).")
    parser.add_argument("port", type=int)
    parser.add_argument("--relay", action="store_true", help="keep what is sent and hand it to receives")
    parser.add_argument("--metrics", type=int, default=0, metavar="PORT", help="serve /metrics on this port")
    args = parser.parse_args()
    run_on(BrokerSettings().event_loop, serve(args.port, args.relay, args.metrics))


if __name__ == "__main__":
    main()
