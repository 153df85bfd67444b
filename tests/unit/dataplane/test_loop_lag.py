"""The event-loop lag probe (dataplane/loop_lag.py) on a real loop that is made to stall."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from prometheus_client import REGISTRY

from dataplane.loop_lag import LoopLagProbe


def _counts() -> tuple[float, float]:
    """(observations, observations of more than 0.25 s) of mq_event_loop_lag_seconds so far."""
    total = REGISTRY.get_sample_value("mq_event_loop_lag_seconds_count") or 0.0
    within = REGISTRY.get_sample_value("mq_event_loop_lag_seconds_bucket", {"le": "0.25"}) or 0.0
    return total, total - within


async def test_a_stalled_loop_is_measured_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    probe = LoopLagProbe(interval=0.01)
    before_total, before_long = _counts()
    probe.start()
    try:
        await asyncio.sleep(0.1)  # some wake-ups on time
        with caplog.at_level(logging.WARNING, logger="dataplane.loop_lag"):
            asyncio.get_running_loop().call_soon(time.sleep, 0.6)  # a callback that holds the loop
            await asyncio.sleep(0.1)
    finally:
        await probe.stop()
    total, long = _counts()
    assert total - before_total >= 5
    assert long - before_long == 1  # the one stall, and only it
    stalls = [r.getMessage() for r in caplog.records if "stalled" in r.getMessage()]
    assert len(stalls) == 1 and stalls[0].startswith("event loop stalled for ")
    ms = int(stalls[0].split()[4])
    assert 500 <= ms < 5_000


async def test_stop_ends_the_probe() -> None:
    probe = LoopLagProbe(interval=0.01)
    probe.start()
    await asyncio.sleep(0.03)
    await probe.stop()
    total, _ = _counts()
    await asyncio.sleep(0.05)
    assert _counts()[0] == total  # nothing observed after stop
    await probe.stop()  # a second stop is harmless
