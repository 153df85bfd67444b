"""The event loop a broker node runs on: uvloop unless the settings ask for asyncio's own.

grpc.aio drives every call through asyncio (futures, call_soon, the poller's wake-up socket), so
the loop's own cost is paid several times per RPC. uvloop's loop does that work in C: the broker's
CPU per single-message SendMessage fell by 7-14%, batched produce rose by a fifth or more and consume
by 4-12% (docs/benchmarks.md, "The broker on uvloop"). ``event_loop = "asyncio"`` keeps the standard
loop, to compare or where uvloop cannot be installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

__all__ = ("EventLoopKind", "loop_factory", "run_on", "uvloop_installed")

EventLoopKind = Literal["uvloop", "asyncio"]
T = TypeVar("T")


def uvloop_installed() -> bool:
    """Whether uvloop can be imported (BrokerSettings refuses ``event_loop = "uvloop"`` otherwise)."""
    return importlib.util.find_spec("uvloop") is not None


def loop_factory(kind: EventLoopKind) -> Callable[[], asyncio.AbstractEventLoop]:
    """A function making a new loop of ``kind``."""
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run_on(kind: EventLoopKind, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a loop of ``kind``."""
    with asyncio.Runner(loop_factory=loop_factory(kind)) as runner:
        return runner.run(main)
