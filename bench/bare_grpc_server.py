"""A bare grpc.aio MessagingService that accepts SendMessage and stores nothing.

It is the framework's ceiling for ``broker_bench.py``: the same requests, the same Python gRPC stack,
no broker work at all. ReceiveMessage streams ``batch_size`` copies of one prepared 1 KiB message
(status first, delivery timestamp last, as a broker does) and AckMessage answers OK for every entry,
so a consume run against it measures what streaming the responses alone costs. The stream is
written as the broker writes it (``dataplane.buffered_stream``: one socket write per receive).
It runs on the event loop a broker started in the same environment would (``MQ_BROKER_EVENT_LOOP``,
uvloop unless set), and registers its methods as the broker does (:func:`register`), so the two
are measured on the same stack.
Run: ``python bench/bare_grpc_server.py PORT``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator

import grpc

from dataplane.config import BrokerSettings
from dataplane.event_loop import run_on
from dataplane.wire import add_servicer
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc as svc_grpc


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
        done = svc.ReceiveMessageResponse()
        done.delivery_timestamp.GetCurrentTime()
        yield done

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


def register(servicer: BareMessagingService, server: grpc.aio.Server) -> None:
    """Register as the broker registers its service (``dataplane.wire.add_servicer``: one generic
    handler, requests decoded by the handler, ReceiveMessage written in one go). The generated
    ``add_MessagingServiceServicer_to_server`` registers every method as well, and grpc.aio's accept
    loop then waits on one pending request per registered method for every call: a ceiling below
    the framework's own."""
    add_servicer(
        server, servicer, svc.DESCRIPTOR.services_by_name["MessagingService"], buffered=("ReceiveMessage",)
    )


async def serve(port: int) -> None:
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", 64 << 20),
            # as the broker (dataplane/server.py): queue a burst of calls rather than cancel them
            ("grpc.server.max_pending_requests", 10_000),
            ("grpc.server.max_pending_requests_hard_limit", 20_000),
        ]
    )
    register(BareMessagingService(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await server.wait_for_termination()


if __name__ == "__main__":
    run_on(BrokerSettings().event_loop, serve(int(sys.argv[1])))
