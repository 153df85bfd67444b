"""The event loop a broker node runs on: uvloop unless the settings ask for asyncio's own.

grpc.aio drives every call through asyncio (futures, call_soon, the poller's wake-up socket), so
the loop's own cost is paid several times per RPC. uvloop's loop does that work in C: the broker's
CPU per single-message SendMessage fell by 7-14%, batched produce rose by a fifth or more and consume
by 4-12% (docs/benchmarks.md, "The broker on uvloop"). ``event_loop = "asyncio"`` keeps the standard
loop, to compare or where uvloop cannot be installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

__all__ = ("EventLoopKind", "loop_factory", "run_on")

EventLoopKind = Literal["uvloop", "asyncio"]
T = TypeVar("T")


def loop_factory(kind: EventLoopKind) -> Callable[[], asyncio.AbstractEventLoop]:
    """A function making a new loop of ``kind``; RuntimeError (one line) when uvloop is not installed."""
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError as exc:
            raise RuntimeError(
                "event_loop is uvloop but the uvloop package is not installed "
                "(set MQ_BROKER_EVENT_LOOP=asyncio to run on the standard loop)"
            ) from exc
        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run_on(kind: EventLoopKind, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a loop of ``kind``."""
    with asyncio.Runner(loop_factory=loop_factory(kind)) as runner:
        return runner.run(main)
