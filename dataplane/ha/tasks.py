"""Stopping background tasks for good.

On Python 3.11 ``asyncio.wait_for`` returns its inner result (or raises its inner error) when a
cancel arrives in the same loop turn as the inner future completes, so the cancel is lost: a
follower reconnecting to a dead master caught the ``ConnectionRefusedError`` instead of
``CancelledError`` and kept retrying, and the promotion that was waiting for it never finished.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ("cancel_and_wait",)


async def cancel_and_wait(task: asyncio.Task[None], retry_s: float = 0.2) -> None:
    """Cancel ``task`` and wait until it has ended, cancelling again while a cancel goes unheard."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=retry_s)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()
