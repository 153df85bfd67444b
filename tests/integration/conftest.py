"""Fixtures every integration tier shares."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A real broker process (``mqctl broker start``) on a free loopback port, killed afterwards."""
    process = BrokerProcess(tmp_path / "broker", free_port())
    process.start()
    yield process
    process.kill()
