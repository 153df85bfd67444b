"""A real S3 protocol server (moto in server mode) on a free loopback port, a throttling TCP proxy
in front of it, and a broker with tiered storage switched on."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.integration.broker.conftest import REPO_ROOT, BrokerProcess

BUCKET = "mq-tier"


class MotoServer:
    """``python -m moto.server`` as a subprocess; stopped (or paused) by its PID."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        request = urllib.request.Request(f"{self.endpoint}/{BUCKET}", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class ThrottleProxy:
    """A TCP proxy that forwards client bytes at most ``rate`` bytes/s (None: unthrottled)."""

    def __init__(self, upstream_port: int, rate: float | None) -> None:
        self.upstream_port = upstream_port
        self.rate = rate
        self.upstream_bytes = 0
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, throttled: bool) -> None:
        try:
            while True:
                data = src.recv(16384)
                if not data:
                    break
                dst.sendall(data)
                if throttled:
                    self.upstream_bytes += len(data)
                    rate = self.rate
                    if rate:
                        time.sleep(len(data) / rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            s.close()


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    server = MotoServer(free_port())
    server.start()
    yield server
    server.stop()


def tier_env(monkeypatch: pytest.MonkeyPatch, endpoint: str | None, **extra: str) -> None:
    """Switch tiered storage on for brokers started afterwards (``endpoint`` None: file://)."""
    values = {
        "MQ_BROKER_TIER_ENABLED": "true",
        "MQ_BROKER_TIER_OFFLOAD_AFTER_MS": "0",
        "MQ_BROKER_TIER_HOT_RETENTION_HOURS": "0",
        "MQ_BROKER_TIER_INTERVAL_MS": "200",
        "MQ_BROKER_TIER_REQUEST_TIMEOUT_S": "3",
    }
    if endpoint is not None:
        values |= {
            "MQ_BROKER_TIER_URL": f"s3://{BUCKET}/tier",
            "MQ_BROKER_TIER_ENDPOINT": endpoint,
            "MQ_BROKER_TIER_REGION": "us-east-1",
            "MQ_BROKER_TIER_ACCESS_KEY_ID": "test",
            "MQ_BROKER_TIER_SECRET_ACCESS_KEY": "test",
        }
    values |= extra
    for key, value in values.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def tier_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker process (not started: set the tier environment first), killed afterwards."""
    process = BrokerProcess(tmp_path / "broker", free_port())
    yield process
    process.kill()
