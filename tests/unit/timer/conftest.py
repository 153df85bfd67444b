"""Shared by the timer tests: a store that records the checkpoints the timer service asks of it."""

from __future__ import annotations

from dataplane.store import MessageStore


class CheckpointRecordingStore:
    """The store, recording how far its CommitLog was flushed at each checkpoint the timers ask for
    (everything else goes to the store itself)."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.flushed_at_checkpoints: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def checkpoint(self) -> None:
        self._store.checkpoint()
        self.flushed_at_checkpoints.append(self._store.commit_log.flushed_offset)
