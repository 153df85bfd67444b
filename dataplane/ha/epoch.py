"""EpochFileCache: which master epoch wrote which range of the CommitLog (RocketMQ's epoch file).

File ``<data_dir>/ha/epoch`` (text, one entry per line, ascending)::

    <epoch> <start offset>

Entry *i* covers ``[start_i, start_{i+1})``; the last one runs to the node's max offset. Written
through a temp file + fsync + rename, so a crash leaves the old or the new list, never half of one.
Two nodes agree on every byte below their *consistent point* (:func:`consistent_point`): a rejoining
replica truncates its CommitLog there before it fetches from the master.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

__all__ = ("EpochEntry", "EpochFileCache", "consistent_point")


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def _end_of(entries: Sequence[EpochEntry], i: int, max_offset: int) -> int:
    return entries[i + 1].start_offset if i + 1 < len(entries) else max_offset


def consistent_point(
    replica: Sequence[EpochEntry], replica_max: int, master: Sequence[EpochEntry], master_max: int
) -> int:
    """The offset below which a replica's log equals the master's (RocketMQ ``findConsistentPoint``).

    Walk the replica's epochs from the newest; the first epoch the master also has gives
    ``min(replica end, master end)`` of that epoch. No common epoch: 0 (everything is suspect).
    """
    by_epoch = {e.epoch: i for i, e in enumerate(master)}
    for i in range(len(replica) - 1, -1, -1):
        j = by_epoch.get(replica[i].epoch)
        if j is None:
            continue
        if master[j].start_offset != replica[i].start_offset:
            # the same epoch number starting elsewhere cannot happen with one controller; be safe
            return min(master[j].start_offset, replica[i].start_offset)
        return min(_end_of(replica, i, replica_max), _end_of(master, j, master_max))
    return 0


class EpochFileCache:
    """The persisted epoch list of one node. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: list[EpochEntry] = []
        self._load()

    def _load(self) -> None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return
        entries = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                epoch, start = (int(x) for x in line.split())
            except ValueError as exc:
                raise ValueError(
                    f"{self.path}:{n}: expected '<epoch> <start offset>', found {line!r}"
                ) from exc
            entries.append(EpochEntry(epoch, start))
        self._entries = entries

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write("".join(f"{e.epoch} {e.start_offset}\n" for e in self._entries))
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    @property
    def last_epoch(self) -> int:
        with self._lock:
            return self._entries[-1].epoch if self._entries else 0

    def begin_epoch(self, epoch: int, start_offset: int) -> None:
        """A new master epoch starts at ``start_offset``; later entries (unfetched) are dropped."""
        with self._lock:
            if self._entries and self._entries[-1].epoch > epoch:
                raise ValueError(f"epoch {epoch} is older than {self._entries[-1].epoch}")
            kept = [e for e in self._entries if e.start_offset < start_offset and e.epoch < epoch]
            kept.append(EpochEntry(epoch, start_offset))
            self._entries = kept
            self._save()

    def replace(self, entries: Iterable[EpochEntry]) -> None:
        """Adopt the master's list (after truncating to the consistent point)."""
        with self._lock:
            self._entries = [EpochEntry(int(e[0]), int(e[1])) for e in entries]
            self._save()

    def truncate_from(self, offset: int) -> None:
        """Forget entries that start after ``offset`` (the log was truncated there)."""
        with self._lock:
            kept = [e for e in self._entries if e.start_offset <= offset]
            if kept != self._entries:
                self._entries = kept
                self._save()
