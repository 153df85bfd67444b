"""grpc.aio bootstrap of one broker node: start, serve until a signal, stop gracefully."""

from __future__ import annotations

import asyncio
import logging
import signal

import grpc

from dataplane.broker import Broker
from dataplane.config import BrokerSettings
from dataplane.services import BrokerAdminServicer, MessagingServicer
from mqcloud.admin.v1 import admin_pb2_grpc
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc

__all__ = ("BrokerServer", "run")

logger = logging.getLogger(__name__)


class BrokerServer:
    """The gRPC server (v2 MessagingService + BrokerAdmin on one port) around a :class:`Broker`."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.broker = Broker(settings)
        limit = settings.max_grpc_message_bytes
        self.server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                ("grpc.max_metadata_size", 16 << 10),
                ("grpc.so_reuseport", 0),
                # C-core cancels calls that wait for the application beyond these counts (defaults
                # 1000/3000): a burst of single-message sends from many producers came back
                # CANCELLED, which the SDKs do not retry. Queue them instead.
                ("grpc.server.max_pending_requests", 10_000),
                ("grpc.server.max_pending_requests_hard_limit", 20_000),
            ]
        )
        service_pb2_grpc.add_MessagingServiceServicer_to_server(MessagingServicer(self.broker), self.server)
        admin_pb2_grpc.add_BrokerAdminServicer_to_server(BrokerAdminServicer(self.broker), self.server)
        self.port = 0

    async def start(self) -> None:
        self.broker.start(asyncio.get_running_loop())
        self.port = self.server.add_insecure_port(self.settings.listen)
        if self.port == 0:
            raise OSError(f"cannot listen on {self.settings.listen}")
        await self.server.start()

    async def stop(self) -> None:
        self.broker.begin_shutdown()
        await self.server.stop(self.settings.grace_seconds)
        self.broker.close()


def _start_metrics(address: str) -> None:
    if not address or address == "0":
        return
    from prometheus_client import start_http_server

    host, _, port = address.rpartition(":")
    if int(port) == 0:
        return
    start_http_server(int(port), addr=host or "0.0.0.0")


async def run(settings: BrokerSettings) -> None:
    """Serve until SIGTERM/SIGINT, then stop accepting, finish in-flight calls, flush, return."""
    server = BrokerServer(settings)
    await server.start()
    _start_metrics(settings.metrics_listen)
    host = settings.listen.rpartition(":")[0]
    logger.info("broker listening on %s:%d", host, server.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    logger.info("broker stopping (grace %.1fs)", settings.grace_seconds)
    await server.stop()
    logger.info("broker stopped")


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
