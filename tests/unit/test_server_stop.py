"""The bounded steps of a broker's stop (dataplane/server.py): a step that hangs is given up on."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from dataplane.server import _bounded


def test_a_hanging_step_is_given_up_after_its_limit(caplog: pytest.LogCaptureFixture) -> None:
    async def hangs() -> None:
        await asyncio.Event().wait()

    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="dataplane.server"):
        asyncio.run(_bounded("the stuck part", hangs(), 0.2))
    assert time.monotonic() - started < 2
    assert "the stuck part did not stop within" in caplog.text


def test_a_step_that_finishes_is_awaited_and_its_errors_propagate() -> None:
    done: list[int] = []

    async def finishes() -> None:
        await asyncio.sleep(0.01)
        done.append(1)

    async def fails() -> None:
        raise OSError("disk gone")

    asyncio.run(_bounded("a part", finishes(), 5))
    assert done == [1]
    with pytest.raises(OSError, match="disk gone"):
        asyncio.run(_bounded("a part", fails(), 5))
