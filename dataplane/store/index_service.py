"""IndexService: the list of IndexFiles, rolled over when full (RocketMQ ``IndexService``).

Layout: see ``index_file.py``; files in ``<store_dir>/index/`` named by their first commitlog offset.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from dataplane.store.errors import StoreError
from dataplane.store.index_file import IndexFile
from dataplane.store.mapped_file import segment_name
from dataplane.store.record import compiled_index_items

__all__ = ("IndexService", "index_items_python", "uniq_index_key")

logger = logging.getLogger(__name__)


def uniq_index_key(uniq_key: str) -> str:
    """Index key of a client message id: topic-less (``#`` + id); topics are never empty."""
    return "#" + uniq_key


def index_items_python(requests: Sequence[tuple[str, str | None, str | None, int]]) -> list[tuple[str, int]]:
    """(index key, physical offset) of each (topic, KEYS, UNIQ_KEY, physical offset): ``topic#key``
    for each KEYS word, :func:`uniq_index_key` of the id (the compiled ``index_items`` does the same)."""
    items: list[tuple[str, int]] = []
    for topic, keys, uniq_key, physical_offset in requests:
        if keys:
            for key in keys.split():
                items.append((f"{topic}#{key}", physical_offset))
        if uniq_key:
            items.append((uniq_index_key(uniq_key), physical_offset))
    return items


_index_items = compiled_index_items or index_items_python


class IndexService:
    """Builds and queries the index; dispatch under the put lock, queries from any thread.

    Guarantees: every dispatched key is findable until its CommitLog segment is deleted; queries
    return candidates (possibly stale or colliding) that the caller verifies against the record.
    """

    def __init__(self, directory: Path, slot_num: int, max_num: int):
        self.directory = directory
        self.slot_num = slot_num
        self.max_num = max_num
        self.files: list[IndexFile] = []
        self.lock = threading.Lock()

    def load(self) -> None:
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.iterdir()):
            if path.name.isdigit() and len(path.name) == 20:
                self.files.append(IndexFile(path, self.slot_num, self.max_num))

    @property
    def end_phy_offset(self) -> int:
        """Commitlog offset of the last entry indexed (-1 when none)."""
        for f in reversed(self.files):
            if f.index_count > 1:
                return f.end_phy_offset
        return -1

    def _writable(self, physical_offset: int) -> IndexFile:
        files = self.files
        if files and not files[-1].is_full:
            return files[-1]
        self.directory.mkdir(parents=True, exist_ok=True)
        name = segment_name(physical_offset)
        if files and files[-1].file.path.name == name:
            name = segment_name(physical_offset + 1)
        f = IndexFile(self.directory / name, self.slot_num, self.max_num)
        with self.lock:
            self.files.append(f)
        return f

    def put(self, topic: str, keys: str | None, uniq_key: str | None, physical_offset: int, ts: int) -> None:
        """Index the record's KEYS (``topic#key`` each) and UNIQ_KEY (``#id``)."""
        self.put_batch([(topic, keys, uniq_key, physical_offset)], ts)

    def put_batch(self, requests: Sequence[tuple[str, str | None, str | None, int]], ts: int) -> None:
        """Index every (topic, KEYS, UNIQ_KEY, physical offset) of a batch stored at ``ts``."""
        items = _index_items(requests)
        done = 0
        # each pass fills the writable file or seals it; a new file always takes at least one key
        for _ in range(len(items) + 2):
            if done >= len(items):
                return
            try:
                done += self._writable(items[done][1]).put_keys(items, done, ts)
            except OSError:  # a full disk (pwrite): the messages are stored, only their keys are missing
                logger.exception("index: up to %d keys not indexed", len(items) - done)
                return
        raise StoreError(f"index: {len(items) - done} keys found no index file to take them")

    def select(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Distinct candidate offsets, newest index file first."""
        seen: set[int] = set()
        result: list[int] = []
        for f in reversed(list(self.files)):
            for phy in f.select(key, max_num * 2, begin_ms, end_ms):
                if phy not in seen:
                    seen.add(phy)
                    result.append(phy)
            if len(result) >= max_num * 2:
                break
        return result

    def delete_expired(self, min_physical_offset: int) -> int:
        """Delete index files whose every entry points below ``min_physical_offset`` (never the last)."""
        deleted = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < min_physical_offset:
            with self.lock:
                f = self.files.pop(0)
            f.destroy()
            deleted += 1
        return deleted

    def flush(self) -> None:
        for f in list(self.files):
            if not f.file.closed:
                f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files.clear()
