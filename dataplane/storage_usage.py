"""Bytes each tenant holds in the store, for the storage quota and the hourly storage samples.

Counted from the ConsumeQueue entries (each carries its CommitLog record size), so a rescan only
reads the entries appended since the last one; a queue whose head moved (retention deleted files)
is recounted in full. Between rescans accepted sends are added, so the quota reacts at once.
Tiered (offloaded) bytes are not counted here yet.
"""

from __future__ import annotations

import logging
from typing import Any

from dataplane.names import DLQ_PREFIX, RETRY_PREFIX
from dataplane.store.consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE

__all__ = ("StorageUsage", "tenant_topic")

logger = logging.getLogger(__name__)

_READ_BATCH = 4096  # entries per read (80 KiB)


def tenant_topic(qualified: str) -> tuple[str, str] | None:
    """(namespace, tenant-relative topic) of a store topic; None for system topics."""
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if qualified.startswith(prefix):
            ns, sep, group = qualified[len(prefix) :].partition("%")
            return (ns, prefix + group) if sep and ns else None
    ns, sep, name = qualified.partition("%")
    return (ns, name) if sep and ns and name else None


class StorageUsage:
    def __init__(self, store: Any) -> None:
        self.store = store
        # (topic, queue id) -> (first counted offset, next offset to count, bytes)
        self._queues: dict[tuple[str, int], tuple[int, int, int]] = {}
        # (bytes per tenant as of the last rescan, bytes accepted since): replaced as one tuple, because
        # the metrics endpoint reads them on its own thread; read as two attributes, a rescan between the
        # reads showed the old count with the new, empty pending dict (a send missing until the next one)
        self._counts: tuple[dict[str, int], dict[str, int]] = ({}, {})
        self._per_topic: dict[tuple[str, str], int] = {}

    def _count(self, cq: Any, start: int, end: int) -> int:
        total = 0
        offset = start
        while offset < end:
            raw = cq.entries(offset, min(_READ_BATCH, end - offset))
            if not raw:
                break
            for _, size, _ in CQ_ENTRY.iter_unpack(raw):
                total += size
            offset += len(raw) // CQ_ENTRY_SIZE
        return total

    def rescan(self) -> None:
        table = getattr(self.store, "consume_queues", None)
        if table is None:
            return
        per_topic: dict[tuple[str, str], int] = {}
        for key, cq in list(table.queues.items()):
            owner = tenant_topic(key[0])
            if owner is None:
                continue
            low, high = cq.min_offset, cq.max_offset
            first, nxt, size = self._queues.get(key, (low, low, 0))
            if first != low or high < nxt:  # head deleted or queue truncated: count again
                nxt, size = low, 0
            size += self._count(cq, nxt, high)
            self._queues[key] = (low, high, size)
            per_topic[owner] = per_topic.get(owner, 0) + size
        per_tenant: dict[str, int] = {}
        for (ns, _), size in per_topic.items():
            per_tenant[ns] = per_tenant.get(ns, 0) + size
        self._per_topic = per_topic
        self._counts = (per_tenant, {})

    def added(self, namespace: str, size: int) -> None:
        """Bytes accepted since the last rescan (counted until the next one)."""
        pending = self._counts[1]
        pending[namespace] = pending.get(namespace, 0) + size

    def tenant_bytes(self, namespace: str) -> int:
        counted, pending = self._counts
        return counted.get(namespace, 0) + pending.get(namespace, 0)

    def tenant_totals(self) -> dict[str, int]:
        counted, pending = self._counts
        pending = dict(pending)  # one copy: the event loop may add a tenant while this iterates
        return {ns: counted.get(ns, 0) + pending.get(ns, 0) for ns in counted.keys() | pending.keys()}

    def topic_bytes(self) -> dict[tuple[str, str], int]:
        """(namespace, tenant-relative topic) -> bytes, as of the last rescan."""
        return dict(self._per_topic)
