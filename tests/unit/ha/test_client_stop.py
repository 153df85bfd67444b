"""A follower stops for good even when the cancel races its reconnect (Python 3.11 wait_for)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dataplane.ha import client as client_module
from dataplane.ha.client import HAClient
from dataplane.ha.epoch import EpochFileCache
from dataplane.ha.tasks import cancel_and_wait


class _Store:
    max_physical_offset = 0


async def test_stop_ends_a_follower_whose_cancel_raced_a_refused_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a follower whose first connection attempt to a dead master is pending (later ones
    # are refused at once)
    attempts: list[asyncio.Future[Any]] = []
    first_attempt = asyncio.Event()

    async def open_connection(host: str, port: int) -> Any:
        gate: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        attempts.append(gate)
        first_attempt.set()
        if len(attempts) > 1:
            raise ConnectionRefusedError("refused")
        return await gate

    monkeypatch.setattr(client_module.asyncio, "open_connection", open_connection)
    follower = HAClient(_Store(), EpochFileCache(tmp_path / "epoch"), "g", "n0", "127.0.0.1:1", key=b"k" * 32)
    follower.start()
    await first_attempt.wait()
    # when the refusal and the stop land in the same loop turn (wait_for then raises the
    # ConnectionRefusedError instead of CancelledError, and the follower would retry forever)
    attempts[0].set_exception(ConnectionRefusedError("refused"))
    stopping = asyncio.ensure_future(follower.stop())
    done, _ = await asyncio.wait({stopping}, timeout=2)
    # then stop() returns, and the follower does not try again
    assert stopping in done, "stop() did not return"
    tried = len(attempts)
    await asyncio.sleep(0.5)
    assert len(attempts) == tried <= 2


async def test_cancel_and_wait_repeats_a_cancel_the_task_swallowed() -> None:
    # given a task that ignores the first cancel
    heard = []

    async def stubborn() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            heard.append("first")
        await asyncio.sleep(10)

    task = asyncio.ensure_future(stubborn())
    await asyncio.sleep(0)
    # when it is cancelled and waited for
    await asyncio.wait_for(cancel_and_wait(task, retry_s=0.05), 2)
    # then it ended on the second cancel
    assert heard == ["first"] and task.cancelled()
