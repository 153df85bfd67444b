"""Shared fixtures for every tier."""

from __future__ import annotations

import socket

import pytest

__all__ = ("free_port",)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def unused_port() -> int:
    return free_port()
