"""FlushRealTimeService (ASYNC_FLUSH): a flush every interval, or sooner once enough bytes wait."""

from __future__ import annotations

import threading
import time

from dataplane.store.flush import FlushRealTimeService


class _Log:
    """Stands in for the CommitLog's flush: flushes up to ``written`` and says when it has."""

    def __init__(self) -> None:
        self.written = 0
        self.flushed = threading.Event()

    def flush(self) -> int:
        if self.written:
            self.flushed.set()
        return self.written


def test_enough_dirty_bytes_wake_the_flusher_before_its_interval() -> None:
    log = _Log()
    service = FlushRealTimeService(log.flush, 0, interval_ms=10_000, least_bytes=64 << 20)
    service.start()
    try:
        log.written = (64 << 20) - 1
        service.wake_up(log.written)  # one byte short: waits for the interval
        assert not log.flushed.wait(0.3)
        assert service.flushed_offset == 0
        log.written = 64 << 20
        service.wake_up(log.written)
        assert log.flushed.wait(2)  # long before the 10 s interval
        deadline = time.monotonic() + 2
        while service.flushed_offset != 64 << 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert service.flushed_offset == 64 << 20
    finally:
        service.shutdown()


def test_the_interval_flushes_what_waits_below_the_threshold() -> None:
    log = _Log()
    service = FlushRealTimeService(log.flush, 0, interval_ms=200, least_bytes=64 << 20)
    service.start()
    try:
        log.written = 4096
        service.wake_up(log.written)  # far below the threshold
        assert log.flushed.wait(2)  # the 200 ms interval flushes it anyway
        deadline = time.monotonic() + 2
        while service.flushed_offset != 4096 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert service.flushed_offset == 4096
        log.written = 8192  # written, not yet flushed: shutdown flushes it
    finally:
        service.shutdown()
    assert service.flushed_offset == 8192
