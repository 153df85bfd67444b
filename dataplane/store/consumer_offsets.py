"""Consumer offsets per (group, topic, queue id), persisted atomically as JSON.

File ``<store_dir>/config/consumerOffset.json``::

    {"offsetTable": {"<topic>@<group>": {"<queue id>": <offset>, ...}, ...}}

(RocketMQ's key order). Written by :func:`checkpoint.atomic_write` (temp file, fsync, rename).
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from dataplane.store.checkpoint import atomic_write
from dataplane.store.errors import CorruptRecordError

__all__ = ("ConsumerOffsetManager",)

logger = logging.getLogger(__name__)


def _decode(document: object) -> dict[tuple[str, str], dict[int, int]]:
    """The table of a parsed file: ``topic@group`` keys, decimal queue ids, integer offsets >= 0."""
    if not isinstance(document, dict) or not isinstance(document.get("offsetTable"), dict):
        raise ValueError(f"expected {{'offsetTable': {{...}}}}, found {type(document).__name__}")
    table: dict[tuple[str, str], dict[int, int]] = {}
    for key, queues in document["offsetTable"].items():
        topic, _, group = key.rpartition("@")
        if not topic or not isinstance(queues, dict):
            raise ValueError(f"entry {key!r}: expected 'topic@group' -> {{queue id: offset}}")
        offsets: dict[int, int] = {}
        for q, o in queues.items():
            if not (q.isascii() and q.isdigit()) or type(o) is not int or o < 0:
                raise ValueError(f"entry {key!r}: expected a queue id and an offset >= 0, found {q!r}: {o!r}")
            offsets[int(q)] = o
        table[(group, topic)] = offsets
    return table


class ConsumerOffsetManager:
    """Thread-safe offset table; :meth:`persist` writes it atomically, :meth:`load` reads it back.

    Guarantees: after ``persist()`` returns, a restart sees every commit made before the call.
    """

    def __init__(self, path: Path):
        self.path = path
        self._table: dict[tuple[str, str], dict[int, int]] = {}
        self._lock = threading.Lock()
        self._dirty = False

    def load(self) -> None:
        """Read the file; a damaged one raises CorruptRecordError and leaves the table (and file) as is."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        try:
            table = _decode(json.loads(data))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            # ValueError covers bad UTF-8 and bad JSON; RecursionError a hostile nesting depth
            raise CorruptRecordError(f"{self.path}: expected an offsetTable JSON object: {exc}") from exc
        with self._lock:
            self._table = table

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self._table.setdefault((group, topic), {})[queue_id] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when the group never committed for this queue."""
        with self._lock:
            queues = self._table.get((group, topic))
            return None if queues is None else queues.get(queue_id)

    def query_all(self, group: str, topic: str) -> dict[int, int]:
        with self._lock:
            return dict(self._table.get((group, topic), {}))

    def snapshot(self) -> dict[tuple[str, str], dict[int, int]]:
        """A copy of the whole table (HA: the master ships it to its replicas)."""
        with self._lock:
            return {key: dict(queues) for key, queues in self._table.items()}

    def replace(self, table: dict[tuple[str, str], dict[int, int]]) -> None:
        """Replace the whole table (HA: a replica applies its master's snapshot)."""
        with self._lock:
            self._table = {key: dict(queues) for key, queues in table.items()}
            self._dirty = True

    def remove_group(self, group: str) -> None:
        with self._lock:
            for key in [k for k in self._table if k[0] == group]:
                del self._table[key]
            self._dirty = True

    def remove(self, group: str, topic: str) -> None:
        with self._lock:
            if self._table.pop((group, topic), None) is not None:
                self._dirty = True

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self._table if k[1] == topic]:
                del self._table[key]
            self._dirty = True

    def groups_for_topic(self, topic: str) -> set[str]:
        with self._lock:
            return {group for group, t in self._table if t == topic}

    def topics_for_group(self, group: str) -> set[str]:
        with self._lock:
            return {t for g, t in self._table if g == group}

    def persist(self, force: bool = True) -> None:
        """Write the table atomically (only when changed unless ``force``)."""
        with self._lock:
            if not (force or self._dirty):
                return
            self._dirty = False
            data = {
                f"{topic}@{group}": {str(q): o for q, o in sorted(queues.items())}
                for (group, topic), queues in sorted(self._table.items())
            }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps({"offsetTable": data}, indent=1).encode())
