"""A private asyncio event loop on a daemon thread, used by the synchronous clients."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, Generic, Protocol, Self, TypeVar

from mqcloud._blocking_rpc import BlockingRpc
from mqcloud.config import ClientConfig
from mqcloud.errors import IllegalStateError

__all__ = ("BlockingClient", "LoopThread")

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        if self.loop.is_closed():
            return

        async def _drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.submit(_drain()).result(5)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()


class _AsyncClient(Protocol):
    config: ClientConfig
    client_id: str

    async def start(self) -> Any: ...

    async def shutdown(self) -> None: ...


CoreT = TypeVar("CoreT", bound=_AsyncClient)


class BlockingClient(Generic[CoreT]):
    """The blocking flavour of an asyncio client: runs it on a private loop thread.

    Subclasses either build their core in ``__init__`` or, when its asyncio primitives must bind to
    the loop, leave ``_core`` None and override ``_create_core`` (called on the loop by ``start``).
    Their hot calls may skip the loop: :meth:`_direct` gives channels on gRPC's blocking API, for
    calls made on the caller's own thread (:mod:`mqcloud._blocking_rpc`).
    """

    _thread_name = "mqcloud-client"
    _shutdown_timeout = 10.0
    _core: CoreT | None = None
    _loop: LoopThread | None = None
    _calls: BlockingRpc | None = None

    async def _create_core(self) -> CoreT:
        raise IllegalStateError(f"{type(self).__name__} has no client to start")

    @property
    def core(self) -> CoreT:
        if self._core is None:
            raise IllegalStateError(f"{type(self).__name__} is not started")
        return self._core

    def start(self) -> Self:
        if self._loop is not None:
            return self
        self._loop = LoopThread(self._thread_name)
        try:
            if self._core is None:
                self._core = self._loop.run(self._create_core())
            self._loop.run(self._core.start())
            self._calls = BlockingRpc(self._core.config, self._core.client_id)
        except BaseException:
            self.shutdown()
            raise
        return self

    def _lt(self) -> LoopThread:
        if self._loop is None:
            raise IllegalStateError(f"{type(self).__name__} is not started")
        return self._loop

    def _direct(self) -> BlockingRpc:
        """The blocking channels of a started client (raises like :meth:`_lt` when it is not)."""
        calls = self._calls
        if calls is None or self._loop is None:
            raise IllegalStateError(f"{type(self).__name__} is not started")
        return calls

    def shutdown(self) -> None:
        lt, self._loop = self._loop, None
        if lt is None:
            return
        try:
            if self._core is not None:
                lt.run(self._core.shutdown(), self._shutdown_timeout)
        finally:
            calls, self._calls = self._calls, None
            if calls is not None:
                calls.close()
            lt.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
