"""ReplicaReader: the master's side of reads served from a replica (RocketMQ's suggested read).

A consumer far behind asks the master for records long out of its page cache. Reading them from
the master's disk would evict the pages every producer and caught-up consumer needs, so the master
asks an in-sync replica for those records over the replication port (READ / RECORDS frames,
framing.py) and answers the consumer itself: offsets, POP state and filters stay the master's; only
the bytes come from the replica. The records are byte for byte the master's own (the CommitLog is
replicated as is), and the caller decodes each one with its CRC checked.

One connection per replica, one request at a time on it; any failure or timeout answers None and
drops the connection, and the caller reads its own disk instead. A replica that failed is left alone
for ``backoff_s``, so a hung node costs one timeout, not one per pull.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence

from dataplane.ha.client import prove_secret
from dataplane.ha.framing import MAX_READ_ENTRIES, READ_ENTRY, FrameError, FrameType, read_frame, write_frame

__all__ = ("ReplicaReader",)

logger = logging.getLogger(__name__)


class _Connection:
    __slots__ = ("lock", "reader", "writer")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None


class ReplicaReader:
    """Fetches whole CommitLog records from the replication port of a node of the same group."""

    def __init__(self, key: bytes, group: str, timeout_s: float = 1.0, backoff_s: float = 10.0) -> None:
        self.key = key
        self.group = group
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self._connections: dict[str, _Connection] = {}
        self._failed_at: dict[str, float] = {}
        self.failures = 0

    def available(self, ha_address: str) -> bool:
        """False for ``backoff_s`` after a read from that node failed."""
        return time.monotonic() - self._failed_at.get(ha_address, -self.backoff_s) >= self.backoff_s

    async def read(self, ha_address: str, wanted: Sequence[tuple[int, int]]) -> list[bytes] | None:
        """The records at ``wanted`` (offset, size) in order, or None when the node did not answer
        them all within the timeout."""
        if not wanted or len(wanted) > MAX_READ_ENTRIES:
            raise ValueError(f"read 1..{MAX_READ_ENTRIES} records, not {len(wanted)}")
        conn = self._connections.setdefault(ha_address, _Connection())
        async with conn.lock:
            try:
                ask = self._ask_once_more(ha_address, conn, wanted)
                payload = await asyncio.wait_for(ask, self.timeout_s)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, FrameError) as exc:
                self.failures += 1
                self._failed_at[ha_address] = time.monotonic()
                logger.info("replica read from %s failed: %s", ha_address, exc or type(exc).__name__)
                self._drop(conn)
                return None
        if len(payload) != sum(size for _, size in wanted):
            return None  # the node does not hold them all (empty), or answered something else
        records, at = [], 0
        for _, size in wanted:
            records.append(payload[at : at + size])
            at += size
        return records

    async def _ask_once_more(
        self, address: str, conn: _Connection, wanted: Sequence[tuple[int, int]]
    ) -> bytes:
        """:meth:`_ask`; a kept connection the node closed meanwhile (it drops idle readers) is
        replaced once instead of counting as a failure."""
        reused = conn.writer is not None and not conn.writer.is_closing()
        try:
            return await self._ask(address, conn, wanted)
        except (ConnectionError, asyncio.IncompleteReadError):
            if not reused:
                raise
            self._drop(conn)
            return await self._ask(address, conn, wanted)

    async def _ask(self, address: str, conn: _Connection, wanted: Sequence[tuple[int, int]]) -> bytes:
        if conn.writer is None or conn.writer.is_closing():
            host, _, port = address.rpartition(":")
            conn.reader, conn.writer = await asyncio.open_connection(host, int(port))
            await prove_secret(conn.reader, conn.writer, self.key, self.group, address)
        assert conn.reader is not None and conn.writer is not None
        write_frame(conn.writer, FrameType.READ, b"".join(READ_ENTRY.pack(o, n) for o, n in wanted))
        await conn.writer.drain()
        kind, payload = await read_frame(conn.reader)
        if kind is not FrameType.RECORDS:
            raise FrameError(f"expected RECORDS, found {kind.name}")
        return payload

    def _drop(self, conn: _Connection) -> None:
        if conn.writer is not None:
            conn.writer.close()
        conn.reader = conn.writer = None

    async def close(self) -> None:
        for conn in self._connections.values():
            writer = conn.writer
            self._drop(conn)
            if writer is not None:
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
        self._connections.clear()
