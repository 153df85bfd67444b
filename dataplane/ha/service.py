"""HAService: the master side of replication (RocketMQ's ``AutoSwitchHAService``).

Listens on the replication port; each replica connection (``HAConnection``) first proves the group
secret (auth.py: a peer that fails gets nothing and is closed), then handshakes (HELLO / WELCOME
with the consistent point), then the master streams the CommitLog from the offset the
replica reports and the replica reports its offset after every append (framing.py). From the
reports the master keeps, per replica, the confirmed offset, whether it is caught up, and the
lag samples; ``wait_replicated`` is what SendMessage awaits before SEND_OK.

Every node, whatever its role, also answers READ requests on the same port: a master serving a
consumer far behind asks a replica for the CommitLog records it needs (``reads.py``), so cold reads
hit the replica's disk and page cache instead of the master's.

In-sync rule: a replica is caught up when its confirmed offset is within ``max_gap_bytes`` of the
master's max offset; it stays in the local in-sync set until it has not been caught up for
``in_sync_timeout_s`` or disconnects. Only replicas also in the controller's SyncStateSet count
for acknowledgements, so every acknowledged message is on a node the controller may elect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from dataplane.ha import auth
from dataplane.ha.epoch import EpochEntry, EpochFileCache, consistent_point
from dataplane.ha.framing import (
    DATA_HEADER,
    MAX_AUTH_FRAME,
    MAX_FRAME,
    MAX_READ_ENTRIES,
    READ_ENTRY,
    REPORT,
    FrameError,
    FrameType,
    read_frame,
    write_frame,
    write_json,
)
from dataplane.store.errors import StoreError

__all__ = ("HAService", "ReplicaState")

logger = logging.getLogger(__name__)

_KEEP_ALIVE_S = 0.5  # an empty DATA frame after this long without one
_CHUNK = 1 << 20  # bytes per DATA frame: large enough for throughput, small enough to keep lag low
_LAG_SAMPLES = 2048


class ReplicaState:
    """What the master knows about one connected replica."""

    __slots__ = ("confirmed", "connected", "in_sync", "lag_ms", "last_caught_up", "node", "peer", "sent")

    def __init__(self, node: str, peer: str) -> None:
        self.node = node
        self.peer = peer
        self.confirmed = -1
        self.connected = True
        self.in_sync = False
        self.last_caught_up = 0.0
        self.sent: deque[tuple[int, float]] = deque()  # (end offset, monotonic send time)
        self.lag_ms: deque[float] = deque(maxlen=_LAG_SAMPLES)

    def lag_p99_ms(self) -> float:
        if not self.lag_ms:
            return 0.0
        ordered = sorted(self.lag_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


class HAService:
    """Streams the CommitLog to replicas and tracks their acknowledgements (master only serves)."""

    def __init__(
        self,
        store: Any,
        epochs: EpochFileCache,
        group: str,
        *,
        key: bytes,
        max_gap_bytes: int = 1 << 20,
        in_sync_timeout_s: float = 3.0,
        meta_interval_s: float = 0.2,
        meta_snapshot: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.store = store
        self.epochs = epochs
        self.group = group
        self.key = key
        self.auth_failures = 0
        self.max_gap_bytes = max_gap_bytes
        self.in_sync_timeout_s = in_sync_timeout_s
        self.meta_interval_s = meta_interval_s
        self.meta_snapshot = meta_snapshot
        self.serving = False  # True only while this node is the master
        self.epoch = 0
        self.controller_sss: set[str] = set()
        self.replicas: dict[str, ReplicaState] = {}
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._data_events: set[asyncio.Event] = set()  # one per streamer: set when the log grows
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._read_writers: set[asyncio.StreamWriter] = set()  # READ connections outlive a role
        self.reads_served = 0  # records sent to READ requests
        self.read_idle_s = 60.0  # a READ connection idle this long is closed (the reader reconnects)
        self.port = 0

    async def start(self, listen: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.store.add_dispatch_listener(self._on_dispatch)
        host, _, port = listen.rpartition(":")
        self._server = await asyncio.start_server(self._handle, host or "127.0.0.1", int(port))
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.stop_serving()
        if self._server is not None:
            self._server.close()
            for writer in list(self._read_writers):
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def start_serving(self, epoch: int) -> None:
        self.epoch = epoch
        self.serving = True

    def stop_serving(self) -> None:
        """No longer the master: drop every replica connection and fail every waiting send."""
        self.serving = False
        for writer in list(self._writers):
            writer.close()
        self.replicas.clear()
        self.fail_waiters()

    def fail_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, fut in waiters:
            if not fut.done():
                fut.set_result(False)

    #
    # In-sync accounting
    #

    def local_in_sync(self) -> list[str]:
        """Replicas this master found caught up recently (what it proposes to the controller)."""
        now = time.monotonic()
        out = []
        # list(): the metrics endpoint's thread calls this (HA gauges) while the loop adds and drops
        # replicas; a copy is taken in one step under the GIL, iterating the live dict is not
        for r in list(self.replicas.values()):
            r.in_sync = r.connected and now - r.last_caught_up < self.in_sync_timeout_s
            if r.in_sync:
                out.append(r.node)
        return sorted(out)

    def counted_replicas(self) -> list[ReplicaState]:
        """Replicas whose confirmations count: locally in sync and in the controller's SyncStateSet."""
        local = set(self.local_in_sync())
        return [r for r in list(self.replicas.values()) if r.node in local and r.node in self.controller_sss]

    def _copies(self, offset: int) -> int:
        return sum(1 for r in self.counted_replicas() if r.confirmed >= offset)

    async def wait_replicated(self, offset: int, replicas: int, timeout_s: float) -> bool:
        """True once ``replicas`` counted replicas confirmed ``offset``; False on timeout or demotion."""
        if replicas <= 0:
            return True
        if self._copies(offset) >= replicas:
            return True
        assert self._loop is not None
        fut: asyncio.Future[bool] = self._loop.create_future()
        entry = (offset, replicas, fut)
        self._waiters.append(entry)
        timer = self._loop.call_later(timeout_s, _resolve, fut, False)
        try:
            return await fut
        finally:
            timer.cancel()
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

    def _wake_waiters(self) -> None:
        if not self._waiters:
            return
        counted = self.counted_replicas()
        for offset, need, fut in self._waiters:
            if not fut.done() and sum(1 for r in counted if r.confirmed >= offset) >= need:
                fut.set_result(True)

    #
    # Connections
    #

    def _on_dispatch(self, topic: str, queue_id: int, max_offset: int) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            self._set_data()
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._set_data)

    def _set_data(self) -> None:
        for event in self._data_events:
            event.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        peer = f"{host}:{port}"
        self._writers.add(writer)
        replica: ReplicaState | None = None
        streamer: asyncio.Task[None] | None = None
        try:
            if not await self._authenticate(reader, writer, peer):
                return
            kind, payload = await asyncio.wait_for(read_frame(reader), 10)
            if kind is FrameType.READ:
                self._writers.discard(writer)
                self._read_writers.add(writer)
                await self._serve_reads(reader, writer, payload)
                return
            if kind is not FrameType.HELLO:
                raise FrameError(f"expected HELLO, found {kind.name}")
            hello = json.loads(payload)
            node = str(hello["node"])
            if not self.serving:
                write_frame(writer, FrameType.REFUSE, b"not the master")
                return
            if hello.get("group") != self.group:
                write_frame(writer, FrameType.REFUSE, f"this is group {self.group!r}".encode())
                return
            theirs = [EpochEntry(int(e), int(s)) for e, s in hello.get("epochs", [])]
            mine = self.epochs.entries
            max_offset = self.store.max_physical_offset
            start = consistent_point(theirs, int(hello.get("max_offset", 0)), mine, max_offset)
            write_json(
                writer,
                FrameType.WELCOME,
                {"epoch": self.epoch, "epochs": [list(e) for e in mine], "start": start},
            )
            kind, payload = await asyncio.wait_for(read_frame(reader), 30)
            if kind is not FrameType.REPORT:
                raise FrameError(f"expected REPORT, found {kind.name}")
            (offset,) = REPORT.unpack(payload)
            old = self.replicas.get(node)
            if old is not None:
                old.connected = False
            replica = self.replicas[node] = ReplicaState(node, peer)
            replica.confirmed = offset
            logger.info("replica %s (%s) connected, streaming from %d", node, peer, offset)
            streamer = asyncio.create_task(self._stream(replica, writer, offset))
            while self.serving:
                kind, payload = await read_frame(reader)
                if kind is not FrameType.REPORT:
                    raise FrameError(f"expected REPORT, found {kind.name}")
                (offset,) = REPORT.unpack(payload)
                self._on_report(replica, offset)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, FrameError, ValueError) as exc:
            logger.info("replication connection from %s ended: %s", peer, exc or type(exc).__name__)
        finally:
            if replica is not None:
                replica.connected = False
                if self.replicas.get(replica.node) is replica:
                    del self.replicas[replica.node]
            if streamer is not None:
                streamer.cancel()
            self._writers.discard(writer)
            self._read_writers.discard(writer)
            writer.close()

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> bool:
        """Challenge the peer; True once it proved the secret (and got the master's proof)."""
        server = auth.new_nonce()
        write_frame(writer, FrameType.CHALLENGE, server)
        await writer.drain()
        reason = ""
        try:
            kind, payload = await asyncio.wait_for(read_frame(reader, MAX_AUTH_FRAME), 5)
        except FrameError as exc:
            kind, payload, reason = FrameType.REFUSE, b"", str(exc)
        if not reason:
            if kind is not FrameType.AUTH:
                reason = f"expected AUTH, found {kind.name}"
            elif len(payload) != auth.NONCE_BYTES + auth.PROOF_BYTES:
                reason = f"AUTH of {len(payload)} bytes"
            else:
                client, proof = payload[: auth.NONCE_BYTES], payload[auth.NONCE_BYTES :]
                if auth.verify(auth.replica_proof(self.key, self.group, server, client), proof):
                    write_frame(
                        writer, FrameType.AUTH_OK, auth.master_proof(self.key, self.group, server, client)
                    )
                    return True
                reason = "wrong replication secret"
        self.auth_failures += 1
        logger.warning("replication peer %s refused: authentication failed (%s)", peer, reason)
        write_frame(writer, FrameType.REFUSE, b"authentication failed")
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        return False

    async def _serve_reads(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, payload: bytes
    ) -> None:
        """Answer READ frames until the reader hangs up (or idles past ``read_idle_s``)."""
        while True:
            wanted = _read_request(payload)
            records = await asyncio.to_thread(self._records, wanted)
            self.reads_served += len(wanted) if records else 0
            write_frame(writer, FrameType.RECORDS, records)
            await writer.drain()
            kind, payload = await asyncio.wait_for(read_frame(reader), self.read_idle_s)
            if kind is not FrameType.READ:
                raise FrameError(f"expected READ, found {kind.name}")

    def _records(self, wanted: list[tuple[int, int]]) -> bytes:
        """The whole records at ``wanted`` (offset, size), concatenated; b"" unless all are held.

        Runs in a worker thread: cold reads must not stall this node's loop. Only whole records are
        sent (read_raw stops at a torn or foreign boundary), and the reader checks every one (magic,
        CRC, offset)."""
        commit_log = self.store.commit_log
        parts = []
        try:
            for offset, size in wanted:
                raw = commit_log.read_raw(offset, size)
                if len(raw) != size:
                    return b""
                parts.append(raw)
        except (StoreError, ValueError):  # deleted by retention, or unmapped while read
            return b""
        return b"".join(parts)

    def _on_report(self, replica: ReplicaState, offset: int) -> None:
        now = time.monotonic()
        replica.confirmed = offset
        sent = replica.sent
        while sent and sent[0][0] <= offset:
            replica.lag_ms.append((now - sent.popleft()[1]) * 1000)
        if self.store.max_physical_offset - offset <= self.max_gap_bytes:
            replica.last_caught_up = now
        self._wake_waiters()

    async def _stream(self, replica: ReplicaState, writer: asyncio.StreamWriter, offset: int) -> None:
        store = self.store
        loop = asyncio.get_running_loop()
        last_meta = b""
        next_meta = 0.0
        last_sent = time.monotonic()
        grown = asyncio.Event()
        self._data_events.add(grown)
        try:
            while self.serving and replica.connected:
                now = time.monotonic()
                if self.meta_snapshot is not None and now >= next_meta:
                    next_meta = now + self.meta_interval_s
                    meta = json.dumps(self.meta_snapshot(), separators=(",", ":"), sort_keys=True).encode()
                    if meta != last_meta:
                        write_frame(writer, FrameType.META, meta)
                        last_meta = meta
                grown.clear()
                try:
                    data = store.read_commit_log(offset, _CHUNK)
                except StoreError as exc:
                    logger.warning("replica %s asks for offset %d: %s", replica.node, offset, exc)
                    write_frame(writer, FrameType.REFUSE, str(exc).encode())
                    await writer.drain()
                    writer.close()
                    return
                if data:
                    master_max = store.max_physical_offset
                    write_frame(writer, FrameType.DATA, DATA_HEADER.pack(offset, master_max) + data)
                    offset += len(data)
                    last_sent = now
                    replica.sent.append((offset, time.monotonic()))
                    if len(replica.sent) > _LAG_SAMPLES:
                        replica.sent.popleft()
                    await writer.drain()
                    continue
                if now - last_sent >= _KEEP_ALIVE_S:
                    # keep-alive with the master's max offset; a replica with nothing to do reports back
                    write_frame(writer, FrameType.DATA, DATA_HEADER.pack(offset, store.max_physical_offset))
                    last_sent = now
                    await writer.drain()
                # Woken by the log's growth, or by this timer for the next keep-alive: a loop timer
                # per wait, not asyncio.timeout or wait_for (a Python object, or a task, per wait
                # cost more than the frame's write on a busy master: one wait per replica per send).
                wake = loop.call_later(_KEEP_ALIVE_S - (now - last_sent), grown.set)
                try:
                    await grown.wait()
                finally:
                    wake.cancel()
        except (ConnectionError, RuntimeError):
            writer.close()
        finally:
            self._data_events.discard(grown)


def _read_request(payload: bytes) -> list[tuple[int, int]]:
    """The (offset, size) pairs of a READ frame; FrameError when it is not one."""
    count, rest = divmod(len(payload), READ_ENTRY.size)
    if rest or not 0 < count <= MAX_READ_ENTRIES:
        raise FrameError(f"READ of {len(payload)} bytes: expected 1..{MAX_READ_ENTRIES} entries")
    wanted = [(int(o), int(n)) for o, n in READ_ENTRY.iter_unpack(payload)]
    if any(o < 0 or n <= 0 for o, n in wanted) or sum(n for _, n in wanted) > MAX_FRAME:
        raise FrameError("READ asks for a negative offset, an empty record or more than a frame")
    return wanted


def _resolve(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)
