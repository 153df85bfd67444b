"""PeriodicService: a named daemon thread running one callable every interval until shut down."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ("PeriodicService",)

logger = logging.getLogger(__name__)


class PeriodicService:
    """Runs ``task`` every ``interval_ms`` on its own thread; errors are logged, never fatal."""

    def __init__(self, name: str, interval_ms: int, task: Callable[[], object]):
        self.name = name
        self.interval = interval_ms / 1000
        self.task = task
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wake_up(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.task()
            except Exception:
                logger.exception("%s failed", self.name)

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
