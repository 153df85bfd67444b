"""A bare grpc.aio MessagingService that accepts SendMessage and stores nothing.

It is the framework's ceiling for ``broker_bench.py``: the same requests, the same Python gRPC stack,
no broker work at all. Run: ``python bench/bare_grpc_server.py PORT``.
"""

from __future__ import annotations

import asyncio
import sys

import grpc

from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc as svc_grpc


class BareMessagingService(svc_grpc.MessagingServiceServicer):
    async def SendMessage(
        self, request: svc.SendMessageRequest, context: grpc.aio.ServicerContext
    ) -> svc.SendMessageResponse:
        ok = pb.Status(code=pb.Code.OK, message="OK")
        entries = [
            svc.SendResultEntry(status=ok, message_id=m.system_properties.message_id, offset=i)
            for i, m in enumerate(request.messages)
        ]
        return svc.SendMessageResponse(status=ok, entries=entries)


async def serve(port: int) -> None:
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 << 20)])
    svc_grpc.add_MessagingServiceServicer_to_server(BareMessagingService(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
