"""Receive attempts: a receive retried with its ``attempt_id`` gets what the lost try took.

Clients send an ``attempt_id`` with each ReceiveMessage and keep it when they retry a receive that
failed (a timeout, a broken connection); RocketMQ answers the retry with the same messages. Without
that, what the lost try took stayed invisible until its invisible time ran out, and a FIFO group's
message groups stayed blocked as long.

The broker remembers, per (POP group, topic, attempt id), the messages each receive took (queue,
offset and the nonce of that delivery) for ``MAX_AGE_S``, at most ``MAX_ATTEMPTS`` receives (the
oldest go first). A retry gets again those still in flight under that delivery; an ack, a
ChangeInvisibleDuration or a redelivery since leaves a message out. In memory only: a retry after a
restart is answered as a new receive.
"""

from __future__ import annotations

import time
from collections import OrderedDict

__all__ = ("MAX_AGE_S", "MAX_ATTEMPTS", "AttemptKey", "ReceiveAttempts", "Taken")

MAX_ATTEMPTS = 4096  # receives remembered (about one per open receive of every consumer)
MAX_AGE_S = 300.0  # a retry comes within the client's request timeout plus its long poll

AttemptKey = tuple[str, str, str]  # POP group, topic, attempt id
Taken = list[tuple[int, int, str]]  # (queue id, offset, nonce) of each message a receive took


class ReceiveAttempts:
    """What recent receives took, by attempt. Loop-thread only."""

    def __init__(self, max_attempts: int = MAX_ATTEMPTS, max_age_s: float = MAX_AGE_S) -> None:
        self._taken: OrderedDict[AttemptKey, tuple[float, Taken]] = OrderedDict()
        self._max_attempts = max_attempts
        self._max_age_s = max_age_s

    def __len__(self) -> int:
        return len(self._taken)

    def remember(self, key: AttemptKey, taken: Taken, now_s: float | None = None) -> None:
        now = time.monotonic() if now_s is None else now_s
        self._taken[key] = (now, taken)
        self._taken.move_to_end(key)
        while len(self._taken) > self._max_attempts:
            self._taken.popitem(last=False)

    def recall(self, key: AttemptKey, now_s: float | None = None) -> Taken:
        """What the receive of ``key`` took, if it is remembered and recent; else nothing."""
        found = self._taken.get(key)
        if found is None:
            return []
        now = time.monotonic() if now_s is None else now_s
        if now - found[0] > self._max_age_s:
            del self._taken[key]
            return []
        return found[1]
