"""Pulls far behind served with records from an in-sync replica (docs/ha.md, "Reads from replicas").

RocketMQ's master answers such a pull with "suggest the slave" and the client (or proxy) pulls from
the replica next time. v2 clients talk to the node in their route and have no such field, so the
master plays the proxy: it keeps the offsets, filters and POP state, and reads only the record
bytes from a replica (``dataplane.ha.reads``). A record the replica does not return, or returns
damaged, is read from this node's own disk, so the answer is the same either way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection

from dataplane.broker import Broker
from dataplane.metrics import REPLICA_READ_FALLBACKS, REPLICA_READ_MESSAGES
from dataplane.store.errors import StoreError
from dataplane.store.message import StoredMessage
from dataplane.store.record import tag_hash

__all__ = ("far_behind_reader",)

_MAX_SCAN = 1024  # ConsumeQueue entries looked at for one pull with a tag filter
_MAX_BYTES = 4 << 20  # the store's default answer size


async def far_behind_reader(
    broker: Broker, topic: str, queue_id: int, offset: int, max_count: int, tags: Collection[str] | None
) -> Callable[[int], StoredMessage] | None:
    """A CommitLog read for ``StoreReader.get_messages`` that serves the records of this pull from a
    replica, when the pull starts further behind than ``replica_read_behind_bytes``; None (read
    here) otherwise."""
    ha = broker.ha
    behind = broker.settings.replica_read_behind_bytes
    if ha is None or behind <= 0 or not ha.writable():
        return None
    store = broker.store
    hashes = {tag_hash(t) for t in tags} if tags else None  # compile_filter: "*" is None
    scan = max_count if hashes is None else _MAX_SCAN
    entries = store.queue_entries(topic, queue_id, offset, scan)
    if not entries or store.max_physical_offset - entries[0][0] <= behind:
        return None
    wanted: list[tuple[int, int]] = []
    total = 0
    for phys, size, thash in entries:
        if hashes is not None and thash not in hashes:
            continue
        if wanted and (len(wanted) >= max_count or total + size > _MAX_BYTES):
            break
        wanted.append((phys, size))
        total += size
    if not wanted:
        return None
    address = ha.replica_for_read(max(p + n for p, n in wanted))
    if address is None:
        return None
    records = await ha.reads.read(address, wanted)
    if records is None:
        REPLICA_READ_FALLBACKS.inc()
        return None
    fetched: dict[int, StoredMessage] = {}
    for (phys, _), raw in zip(wanted, records, strict=True):
        with contextlib.suppress(StoreError):  # damaged in transit or on the replica: read here
            fetched[phys] = store.decode_raw(raw, phys)
    if len(fetched) < len(wanted):
        REPLICA_READ_FALLBACKS.inc()
    REPLICA_READ_MESSAGES.inc(len(fetched))
    local = store.commit_log.read_message

    def read(phys: int) -> StoredMessage:
        msg = fetched.get(phys)
        return msg if msg is not None else local(phys)

    return read
