"""Parked long polls of a broker, and which of them a new message wakes.

A new message on a topic wakes one parked ReceiveMessage per consumer group, the one parked longest,
not every receive of the topic: with N members of a group parked, waking all of them costs N pop
passes per message while one takes it. The woken receive passes the wake on to the next member of
its group when others may still find something (it took a full batch, it took nothing, or its filter
may have left messages another member's filter takes: RocketMQ asks members of a group to subscribe
alike, but does not enforce it). A pass reaches only receives parked before the wake, so a wake ends
after at most one try by each member parked at that time; a receive that parks again afterwards
waits for the next wake. PullMessage waits (one queue each, no shared position) are all woken.
"""

from __future__ import annotations

import asyncio

__all__ = ("EVERY", "LongPolls", "Parked")

# The key of parked waits that every wake of their topic reaches.
EVERY = ""


class Parked:
    """One parked wait; its future is resolved with the number of the wake that reached it."""

    __slots__ = ("future", "key", "seq", "topic")

    def __init__(self, future: asyncio.Future[int], topic: str, key: str, seq: int) -> None:
        self.future = future
        self.topic = topic
        self.key = key
        self.seq = seq


class LongPolls:
    """Parked waits by topic, then by consumer group (``EVERY`` for waits woken all together).

    Loop-thread only. Each wait has a sequence number; a wake's number is the last one issued when
    it happened, so "parked before this wake" is ``seq <= wake``.
    """

    def __init__(self) -> None:
        self._parked: dict[str, dict[str, dict[int, Parked]]] = {}
        self._seq = 0

    def __contains__(self, topic: object) -> bool:
        return topic in self._parked

    def topics(self) -> list[str]:
        return list(self._parked)

    def park(self, loop: asyncio.AbstractEventLoop, topic: str, key: str) -> Parked:
        self._seq += 1
        parked = Parked(loop.create_future(), topic, key, self._seq)
        self._parked.setdefault(topic, {}).setdefault(key, {})[parked.seq] = parked
        return parked

    def drop(self, parked: Parked) -> None:
        groups = self._parked.get(parked.topic)
        if groups is None:
            return
        waits = groups.get(parked.key)
        if waits is None:
            return
        waits.pop(parked.seq, None)
        if not waits:
            del groups[parked.key]
            if not groups:
                del self._parked[parked.topic]

    def wake(self, topic: str) -> None:
        """Wake one wait of each group parked on ``topic`` and every ``EVERY`` wait."""
        groups = self._parked.get(topic)
        if not groups:
            return
        wake = self._seq
        for key in list(groups):
            if key == EVERY:
                for parked in list(groups[key].values()):
                    self._resolve(parked, wake)
            else:
                self._wake_first(topic, key, wake)

    def pass_on(self, topic: str, key: str, wake: int) -> None:
        """Hand wake number ``wake`` to the next wait of ``key`` parked before it, if any."""
        if key != EVERY:
            self._wake_first(topic, key, wake)

    def wake_all(self, topic: str) -> None:
        """Wake every wait on ``topic`` (positions were reset, or the broker is stopping)."""
        groups = self._parked.get(topic)
        if not groups:
            return
        wake = self._seq
        for waits in list(groups.values()):
            for parked in list(waits.values()):
                self._resolve(parked, wake)

    def _wake_first(self, topic: str, key: str, wake: int) -> None:
        waits = self._parked.get(topic, {}).get(key)
        if not waits:
            return
        for seq in list(waits):
            if seq > wake:
                return  # parked after the wake: it looked at the store itself
            parked = waits[seq]
            if self._resolve(parked, wake):
                return

    def _resolve(self, parked: Parked, wake: int) -> bool:
        """Resolve and forget ``parked``; False when it had already ended (timed out, cancelled)."""
        self.drop(parked)
        if parked.future.done():
            return False
        parked.future.set_result(wake)
        return True
