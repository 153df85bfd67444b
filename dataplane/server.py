"""grpc.aio bootstrap of one broker node: start, serve until a signal, stop gracefully."""

from __future__ import annotations

import asyncio
import cProfile
import faulthandler
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable

import grpc

from dataplane import buffered_stream, grpc_core
from dataplane.broker import Broker
from dataplane.config import BrokerSettings
from dataplane.cpu_affinity import format_cpu_list
from dataplane.guard import Guard
from dataplane.heap import freeze_startup_heap, watch_gc_pauses
from dataplane.interceptors import AdminAuthInterceptor, MessagingInterceptor
from dataplane.loop_cpu import apply_loop_cpu
from dataplane.loop_lag import LoopLagProbe
from dataplane.services import BUFFERED_STREAMS, ENCODED_ANSWERS, BrokerAdminServicer, MessagingServicer
from dataplane.services.cluster import ClusterAdminServicer
from dataplane.services.messages_admin import MessageAdminServicer
from dataplane.services.tier_admin import TierAdminServicer
from dataplane.wire import add_servicer
from mqcloud.admin.v1 import admin_pb2, cluster_pb2, messages_pb2, tier_pb2
from mqcloud.apache.rocketmq.v2 import service_pb2

__all__ = ("PROFILE_ENV", "BrokerServer", "run")

PROFILE_ENV = "MQ_BROKER_PROFILE"
# Each asynchronous step of a stop, beyond the gRPC grace period, gets this long before the stop goes
# on without it: SIGTERM must end the process (a rolling upgrade waits on it), whatever one part hangs on.
STOP_STEP_S = 10.0

logger = logging.getLogger(__name__)


class BrokerServer:
    """The gRPC server (v2 MessagingService + BrokerAdmin on one port) around a :class:`Broker`."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.broker = Broker(settings)
        self.guard = Guard(self.broker)
        token = settings.admin_token.get_secret_value() if settings.admin_token else None
        limit = settings.max_grpc_message_bytes
        admin_gate = AdminAuthInterceptor(token, settings.dev_mode).refusal  # every admin service
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
            ],
        )
        # wire.add_servicer: malformed request bytes get INVALID_ARGUMENT instead of a crash
        add_servicer(
            self.server,
            MessagingServicer(self.broker),
            service_pb2.DESCRIPTOR.services_by_name["MessagingService"],
            wrap=MessagingInterceptor(self.guard).wrap,
            buffered=BUFFERED_STREAMS,
            encoded=ENCODED_ANSWERS,
        )
        add_servicer(
            self.server,
            BrokerAdminServicer(self.broker),
            admin_pb2.DESCRIPTOR.services_by_name["BrokerAdmin"],
            gate=admin_gate,
        )
        add_servicer(
            self.server,
            MessageAdminServicer(self.broker),
            messages_pb2.DESCRIPTOR.services_by_name["MessageAdmin"],
            gate=admin_gate,
        )
        add_servicer(
            self.server,
            ClusterAdminServicer(self.broker),
            cluster_pb2.DESCRIPTOR.services_by_name["ClusterAdmin"],
            gate=admin_gate,
        )
        add_servicer(
            self.server,
            TierAdminServicer(self.broker),
            tier_pb2.DESCRIPTOR.services_by_name["TierAdmin"],
            gate=admin_gate,
        )
        self.port = 0
        self._profile: _Profile | None = None
        self.loop_lag = LoopLagProbe()

    async def start(self) -> None:
        if os.environ.get(PROFILE_ENV):
            self._profile = _Profile(os.environ[PROFILE_ENV])
        self.broker.start(asyncio.get_running_loop())
        if self.broker.ha is not None:
            await self.broker.ha.start()
        self.guard.start()
        self.loop_lag.start()
        self.port = _add_port(self.server, self.settings)
        if self.port == 0:
            raise OSError(f"cannot listen on {self.settings.listen}")
        await self.server.start()

    async def stop(self) -> None:
        grace = self.settings.grace_seconds
        # A stop that overruns every bound below writes each thread's stack to stderr (the log).
        faulthandler.dump_traceback_later(grace + 3 * STOP_STEP_S + 5, exit=False)
        try:
            await self.loop_lag.stop()
            self.broker.begin_shutdown()
            await _bounded("the gRPC server", self.server.stop(grace), grace + STOP_STEP_S)
            if self.broker.ha is not None:
                await _bounded("replication", self.broker.ha.stop(), STOP_STEP_S)
            try:
                await _bounded("metering and quotas", self.guard.stop(), STOP_STEP_S)
            finally:
                started = time.monotonic()
                self.broker.close()
                _log_slow("the store", started)
                if self._profile is not None:
                    self._profile.dump()
        finally:
            faulthandler.cancel_dump_traceback_later()


async def _bounded(what: str, step: Awaitable[None], limit: float) -> None:
    """One step of a stop: waited for at most ``limit`` s, its time logged when it was slow."""
    started = time.monotonic()
    try:
        await asyncio.wait_for(step, limit)
    except TimeoutError:
        logger.error("stopping: %s did not stop within %.0fs; going on without it", what, limit)
        return
    _log_slow(what, started)


def _log_slow(what: str, started: float) -> None:
    took = time.monotonic() - started
    if took >= 1.0:
        logger.warning("stopping: %s took %.1fs", what, took)


class _Profile:
    """cProfile of the loop thread for ``MQ_BROKER_PROFILE=PATH``: SIGUSR1 writes ``PATH.N`` (the
    calls since the previous one) and starts afresh; stopping writes the last part (bench profiling)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.parts = 0
        self.profile = cProfile.Profile()
        self.profile.enable()
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, self.dump)

    def dump(self) -> None:
        self.profile.disable()
        self.profile.dump_stats(f"{self.path}.{self.parts}")
        self.parts += 1
        self.profile = cProfile.Profile()
        self.profile.enable()


def _add_port(server: grpc.aio.Server, settings: BrokerSettings) -> int:
    """The gRPC port: TLS when a certificate and key are configured, else plaintext."""
    if settings.tls_cert_file is None and settings.tls_key_file is None:
        return server.add_insecure_port(settings.listen)
    if settings.tls_cert_file is None or settings.tls_key_file is None:
        raise OSError("TLS needs both tls_cert_file and tls_key_file")
    credentials = grpc.ssl_server_credentials(
        [(settings.tls_key_file.read_bytes(), settings.tls_cert_file.read_bytes())]
    )
    return server.add_secure_port(settings.listen, credentials)


def _start_metrics(address: str) -> None:
    if not address or address == "0":
        return
    from prometheus_client import start_http_server

    host, _, port = address.rpartition(":")
    if int(port) == 0:
        return
    start_http_server(int(port), addr=host or "0.0.0.0")


async def run(settings: BrokerSettings, announce: Callable[[str], None] = logger.info) -> None:
    """Serve until SIGTERM/SIGINT, then stop accepting, finish in-flight calls, flush, return.
    ``announce`` gets the lines a supervisor waits for (``broker listening on HOST:PORT``)."""
    server = BrokerServer(settings)
    await server.start()
    _start_metrics(settings.metrics_listen)
    watch_gc_pauses()
    if settings.gc_freeze:  # full collections would walk every start-up object (dataplane/heap.py)
        logger.info("%d start-up objects frozen out of the garbage collector's walks", freeze_startup_heap())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    logger.info("event loop: %s.%s", type(loop).__module__, type(loop).__qualname__)
    logger.info("gRPC core experiments: %s", os.environ.get(grpc_core.ENV) or "grpcio's defaults")
    if settings.cpu_affinity.strip():
        logger.info("CPU affinity: %s", format_cpu_list(os.sched_getaffinity(0)))
    loop_cpu = apply_loop_cpu(settings.loop_cpu, loop, settings.loop_cpu_placements)
    if loop_cpu is not None:
        logger.info("the event loop and gRPC's polling thread on CPU %d", loop_cpu.cpu)
    if not buffered_stream.AVAILABLE:
        logger.warning("this grpcio has no write-buffer hint; each streamed response is its own write")
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # `kill -USR2 PID`: every thread's stack to stderr, for a node that looks stuck (jstack's job).
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    # announced only once a SIGTERM would stop it gracefully (a supervisor may send one at once)
    if settings.dev_mode:
        announce("development mode: unsigned requests are admitted")
    host = settings.listen.rpartition(":")[0]
    announce(f"broker listening on {host}:{server.port}")
    await stop.wait()
    logger.info("broker stopping (grace %.1fs)", settings.grace_seconds)
    await server.stop()
    if loop_cpu is not None:
        loop_cpu.stop()
    announce("broker stopped")


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
