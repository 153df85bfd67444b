"""HAClient: the replica side of replication (RocketMQ's ``AutoSwitchHAClient``).

Connects to the master's replication port, answers its challenge with the group secret and checks
the master's proof (auth.py), says HELLO with its epoch list and max offset, truncates
its CommitLog to the consistent point the master answers (dropping a divergent tail), adopts the
master's epoch list, then appends every DATA frame with ``MessageStore.append_raw`` (which builds
the ConsumeQueue and IndexFile entries) and REPORTs its new max offset. META frames carry topic and
group configuration and consumer offsets. On any error it reconnects after a short backoff until
:meth:`stop`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from dataplane.ha import auth
from dataplane.ha.epoch import EpochEntry, EpochFileCache
from dataplane.ha.framing import (
    DATA_HEADER,
    MAX_AUTH_FRAME,
    REPORT,
    FrameError,
    FrameType,
    read_frame,
    write_frame,
    write_json,
)
from dataplane.ha.tasks import cancel_and_wait
from dataplane.store.errors import StoreError

__all__ = ("HAClient", "prove_secret")

logger = logging.getLogger(__name__)


class HAClient:
    """Follows one master until stopped. A master that sends nothing for ``idle_timeout_s`` (it
    sends a keep-alive every 0.5 s when it has no data) is left and connected to again."""

    idle_timeout_s = 10.0

    def __init__(
        self,
        store: Any,
        epochs: EpochFileCache,
        group: str,
        node: str,
        master_address: str,
        apply_meta: Callable[[dict[str, Any]], None] | None = None,
        *,
        key: bytes,
        on_truncated: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.key = key
        self.on_truncated = on_truncated
        self.epochs = epochs
        self.group = group
        self.node = node
        self.master_address = master_address
        self.apply_meta = apply_meta
        self.master_max = 0
        self.connected = False
        self.last_data = 0.0  # monotonic time of the last frame from the master
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._writer: asyncio.StreamWriter | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stopped = True
        task, self._task = self._task, None
        if self._writer is not None:
            self._writer.close()
        if task is not None:
            await cancel_and_wait(task)

    async def _run(self) -> None:
        backoff = 0.05
        while not self._stopped:
            try:
                await self._follow()
                backoff = 0.05
            except (OSError, asyncio.IncompleteReadError, TimeoutError, FrameError, ValueError) as exc:
                logger.info("replication from %s: %s", self.master_address, exc or type(exc).__name__)
            except StoreError:
                logger.exception("replication from %s: the store refused the data", self.master_address)
            finally:
                self.connected = False
                if self._writer is not None:
                    self._writer.close()
                    self._writer = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def _follow(self) -> None:
        host, _, port = self.master_address.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 3)
        self._writer = writer
        await self._authenticate(reader, writer)
        store = self.store
        write_json(
            writer,
            FrameType.HELLO,
            {
                "group": self.group,
                "node": self.node,
                "epochs": [list(e) for e in self.epochs.entries],
                "max_offset": store.max_physical_offset,
            },
        )
        await writer.drain()
        kind, payload = await asyncio.wait_for(read_frame(reader), 10)
        if kind is FrameType.REFUSE:
            raise FrameError(f"master refused: {payload.decode(errors='replace')}")
        if kind is not FrameType.WELCOME:
            raise FrameError(f"expected WELCOME, found {kind.name}")
        welcome = json.loads(payload)
        start = int(welcome["start"])
        if start < store.max_physical_offset:
            logger.warning(
                "truncating the CommitLog from %d to %d (not on the master of epoch %s)",
                store.max_physical_offset,
                start,
                welcome.get("epoch"),
            )
            store.truncate_to(start)
            if self.on_truncated is not None:
                self.on_truncated(start)
        self.epochs.replace(EpochEntry(int(e), int(s)) for e, s in welcome["epochs"])
        write_frame(writer, FrameType.REPORT, REPORT.pack(store.max_physical_offset))
        await writer.drain()
        self.connected = True
        logger.info("following %s from offset %d", self.master_address, store.max_physical_offset)
        self.last_data = time.monotonic()
        watch = _IdleWatch(self, writer)
        try:
            await self._apply_frames(reader, writer)
        finally:
            watch.cancel()

    async def _apply_frames(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        store = self.store
        while not self._stopped:
            kind, payload = await read_frame(reader)
            self.last_data = time.monotonic()
            if kind is FrameType.DATA:
                offset, self.master_max = DATA_HEADER.unpack_from(payload)
                data = payload[DATA_HEADER.size :]
                if data:
                    if offset != store.max_physical_offset:
                        raise FrameError(f"DATA at {offset}, expected {store.max_physical_offset}")
                    store.append_raw(offset, data)
                write_frame(writer, FrameType.REPORT, REPORT.pack(store.max_physical_offset))
                await writer.drain()
            elif kind is FrameType.META:
                if self.apply_meta is not None:
                    self.apply_meta(json.loads(payload))
            elif kind is FrameType.REFUSE:
                raise FrameError(f"master refused: {payload.decode(errors='replace')}")
            else:
                raise FrameError(f"unexpected {kind.name} from the master")

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await prove_secret(reader, writer, self.key, self.group, self.master_address)


class _IdleWatch:
    """Closes a replica's connection once its master has sent nothing for the client's
    ``idle_timeout_s`` (the read then ends and ``HAClient._run`` connects again). A loop timer checks
    ``last_data`` four times per limit: a timeout around every frame's read (asyncio.timeout or
    wait_for) cost more than the frame itself on a busy replica."""

    def __init__(self, client: HAClient, writer: asyncio.StreamWriter) -> None:
        self._client, self._writer = client, writer
        self._loop = asyncio.get_running_loop()
        self._every = client.idle_timeout_s / 4
        self._handle = self._loop.call_later(self._every, self._check)

    def _check(self) -> None:
        client = self._client
        if time.monotonic() - client.last_data > client.idle_timeout_s:
            logger.info(
                "replication from %s: nothing for %.1f s", client.master_address, client.idle_timeout_s
            )
            self._writer.close()
            return
        self._handle = self._loop.call_later(self._every, self._check)

    def cancel(self) -> None:
        self._handle.cancel()


async def prove_secret(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: bytes, group: str, peer: str
) -> None:
    """The connecting side of auth.py's challenge-response; FrameError unless the listening node
    proved the group secret too."""
    kind, server = await asyncio.wait_for(read_frame(reader, MAX_AUTH_FRAME), 10)
    if kind is not FrameType.CHALLENGE or len(server) != auth.NONCE_BYTES:
        raise FrameError(f"expected a CHALLENGE, found {kind.name} of {len(server)} bytes")
    client = auth.new_nonce()
    write_frame(writer, FrameType.AUTH, client + auth.replica_proof(key, group, server, client))
    await writer.drain()
    kind, payload = await asyncio.wait_for(read_frame(reader, MAX_AUTH_FRAME), 10)
    if kind is FrameType.REFUSE:
        raise FrameError(f"{peer} refused: {payload.decode(errors='replace')}")
    expected = auth.master_proof(key, group, server, client)
    if kind is not FrameType.AUTH_OK or not auth.verify(expected, payload):
        logger.warning("replication peer %s failed authentication", peer)
        raise FrameError(f"{peer} did not prove the replication secret")
