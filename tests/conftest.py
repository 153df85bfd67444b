"""Shared fixtures for every tier."""

from __future__ import annotations

import os
import random
import socket

import pytest

__all__ = ("free_port",)


_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and stays out of the kernel's way.

    Ports come from below the ephemeral range: a port the kernel hands out for bind(0) is one it
    also gives to outgoing connections, so a process spawned a moment later (or restarted on the same
    port after a kill) could find it taken. Each pytest worker draws from its own slice.
    """
    low, high = 10000, _ephemeral_low() - 1
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    slot = int(worker) if worker.isdigit() else 0
    width = max((high - low) // 8, 100)
    low, high = low + (slot % 8) * width, low + (slot % 8 + 1) * width - 1
    for _ in range(1000):
        port = random.randint(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{high}")


@pytest.fixture
def unused_port() -> int:
    return free_port()
