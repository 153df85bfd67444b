"""The broker's event loop choice (dataplane/event_loop.py)."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop
from pydantic import ValidationError

from dataplane.config import BrokerSettings
from dataplane.event_loop import loop_factory, run_on


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_uvloop_by_default() -> None:
    assert BrokerSettings().event_loop == "uvloop"
    assert run_on("uvloop", _loop_type()) is uvloop.Loop


def test_asyncio_loop_when_asked() -> None:
    kind = run_on("asyncio", _loop_type())
    assert issubclass(kind, asyncio.BaseEventLoop) and not issubclass(kind, uvloop.Loop)


def test_missing_uvloop_is_a_settings_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as on a machine without the package
    with pytest.raises(
        ValidationError, match="uvloop package is not installed: set MQ_BROKER_EVENT_LOOP=asyncio"
    ):
        BrokerSettings()
    assert BrokerSettings(event_loop="asyncio").event_loop == "asyncio"
    assert loop_factory("asyncio") is asyncio.new_event_loop
