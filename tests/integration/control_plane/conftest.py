"""A real broker process (``mqctl broker start``) and an operator API client for end-to-end tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tenants.services.provisioning import set_gateway
from tests.conftest import free_port


def _wait_admin(endpoint: str, timeout_s: float = 30.0) -> None:
    from mqcloud.admin_client import BrokerAdminClient, BrokerAdminError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with BrokerAdminClient(endpoint, timeout=1.0) as client:
                client.list_topics()
                return
        except BrokerAdminError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Broker:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.endpoint = f"127.0.0.1:{free_port()}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "cli.main",
            "broker",
            "start",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            self.endpoint,
            "--metrics-listen",
            "0",
        ]
        self.proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[3])
        _wait_admin(self.endpoint)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker")
    b.start()
    yield b
    b.stop()


@pytest.fixture
def operator_client() -> APIClient:
    set_gateway(None)  # the real gRPC gateway
    from django.conf import settings

    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("op", is_staff=True))
    return client
