"""HANode: one broker node's HA role — heartbeats to the controller, role changes, the write lease.

The node heartbeats the controller every ``heartbeat_interval_s`` and acts on the answer:

- MASTER (epoch e): stop following, start a new epoch in the epoch file at the CommitLog's end,
  serve replicas (HAService), accept writes while the lease lasts. The lease is ``lease_ms`` from
  the moment the answered heartbeat was *sent* (monotonic clock), so a paused or cut-off master
  stops acknowledging before the controller (which waits longer, ``master_timeout_s``) elects
  another one.
- REPLICA of M: refuse writes, stop serving, follow M (HAClient: truncate to the consistent point,
  then fetch).

Controllers are tried in order; a standby's answer names the active one, which is tried next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from dataplane.ha.client import HAClient
from dataplane.ha.epoch import EpochFileCache
from dataplane.ha.reads import ReplicaReader
from dataplane.ha.service import HAService
from dataplane.ha.tasks import cancel_and_wait
from mqcloud.ha.v1 import controller_pb2 as c
from mqcloud.ha.v1 import controller_pb2_grpc

__all__ = ("HANode", "HANodeConfig")

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class HANodeConfig:
    group: str
    node: str
    address: str  # gRPC address advertised in routes
    ha_listen: str
    controllers: list[str]
    data_dir: Path
    key: bytes = field(repr=False)  # replication HMAC key (auth.replication_key)
    heartbeat_interval_s: float = 0.3
    in_sync_timeout_s: float = 3.0
    max_gap_bytes: int = 1 << 20
    meta_interval_s: float = 0.2
    ha_advertise: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class HANode:
    """Role, lease and replication of one node; call :meth:`start` inside the broker's loop."""

    def __init__(
        self,
        store: Any,
        config: HANodeConfig,
        meta_snapshot: Callable[[], dict[str, Any]] | None = None,
        apply_meta: Callable[[dict[str, Any]], None] | None = None,
        on_promoted: Callable[[], None] | None = None,
        on_truncated: Callable[[int], None] | None = None,
        on_role_change: Callable[[], object] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.epochs = EpochFileCache(config.data_dir / "ha" / "epoch")
        self.service = HAService(
            store,
            self.epochs,
            config.group,
            key=config.key,
            max_gap_bytes=config.max_gap_bytes,
            in_sync_timeout_s=config.in_sync_timeout_s,
            meta_interval_s=config.meta_interval_s,
            meta_snapshot=meta_snapshot,
        )
        self.apply_meta = apply_meta
        self.on_promoted = on_promoted
        self.on_truncated = on_truncated  # the replica dropped a divergent tail at this offset
        self.on_role_change = on_role_change  # after a role or master change (not the first role)
        self.role = c.ROLE_UNSPECIFIED
        self.master = c.NodeAddress()
        self.master_epoch = 0
        self.master_alive = False
        self.replica_addresses: list[c.NodeAddress] = []
        self.sync_state_set: list[str] = []
        self.lease_deadline = 0.0
        self.client: HAClient | None = None
        self.controller = ""
        self._controller_index = 0
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        self._seen_epoch = 0
        self.reads = ReplicaReader(config.key, config.group)
        self._read_turn = 0

    #
    # Lifecycle
    #

    async def start(self) -> None:
        self.store.writable = False  # until the controller says we are the master
        await self.service.start(self.config.ha_listen)
        self._running = True
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._heartbeat_loop()), loop.create_task(self._fence_loop())]

    @property
    def ha_address(self) -> str:
        if self.config.ha_advertise:
            return self.config.ha_advertise
        host = self.config.ha_listen.rpartition(":")[0] or "127.0.0.1"
        return f"{host}:{self.service.port}"

    async def stop(self) -> None:
        self._running = False
        for task in self._tasks:
            await cancel_and_wait(task)
        if self.client is not None:
            await self.client.stop()
        await self.reads.close()
        await self.service.stop()
        if self._channel is not None:
            await self._channel.close(None)

    #
    # Write path
    #

    def writable(self) -> bool:
        """Master with an unexpired lease: the only state in which a write may be acknowledged."""
        return self.role == c.MASTER and time.monotonic() < self.lease_deadline

    def why_not_writable(self) -> str:
        if self.role == c.REPLICA:
            return f"this node is a replica; the master is {self.master.node} ({self.master.address})"
        if self.role == c.MASTER:
            return "this master's lease expired (cut off from the controller)"
        return "this node has no role yet (no controller answer)"

    def confirmed_offset(self) -> int:
        """The CommitLog offset every other member of the SyncStateSet holds, capped by what this
        node has flushed: tiered storage offloads only below it, so a newly elected master never
        finds objects for data it does not have. Called from the offload thread (reads snapshots)."""
        flushed = int(self.store.commit_log.flushed_offset)
        others = set(self.sync_state_set) - {self.config.node}
        if not others:
            return flushed
        replicas = dict(self.service.replicas)
        confirmed = [replicas[n].confirmed if n in replicas else -1 for n in others]
        return max(0, min(flushed, *confirmed))

    def replica_for_read(self, end_offset: int) -> str | None:
        """The replication address of a replica to read CommitLog bytes below ``end_offset`` from:
        one in the SyncStateSet whose confirmed offset reaches it (taken in turn), or None."""
        if self.role != c.MASTER:
            return None
        sss = set(self.sync_state_set)
        replicas = self.service.replicas
        candidates = [
            r.ha_address
            for r in self.replica_addresses
            if r.ha_address
            and r.node in sss
            and r.node in replicas
            and replicas[r.node].connected
            and replicas[r.node].confirmed >= end_offset
            and self.reads.available(r.ha_address)
        ]
        if not candidates:
            return None
        self._read_turn += 1
        return candidates[self._read_turn % len(candidates)]

    def in_sync_replicas(self) -> int:
        return len(self.service.counted_replicas())

    async def wait_replicated(self, end_offset: int, replicas: int, timeout_s: float) -> bool:
        return await self.service.wait_replicated(end_offset, replicas, timeout_s)

    #
    # Controller conversation
    #

    def _connect(self, address: str) -> None:
        if self.controller == address and self._stub is not None:
            return
        if self._channel is not None:
            # closing is async; the old channel is dropped and garbage-collected
            self._channel = None
        self.controller = address
        self._channel = grpc.aio.insecure_channel(address)
        self._stub = controller_pb2_grpc.ControllerStub(self._channel)

    def _next_controller(self, hint: str = "") -> None:
        controllers = self.config.controllers
        if hint and hint != self.controller:
            self._connect(hint)
            return
        self._controller_index = (self._controller_index + 1) % len(controllers)
        self._connect(controllers[self._controller_index])

    def _request(self) -> c.BrokerHeartbeatRequest:
        master = self.role == c.MASTER
        return c.BrokerHeartbeatRequest(
            group=self.config.group,
            self=c.NodeAddress(
                node=self.config.node, address=self.config.address, ha_address=self.ha_address
            ),
            max_offset=self.store.max_physical_offset,
            epoch=self.epochs.last_epoch,
            role=self.role,
            in_sync_replicas=self.service.local_in_sync() if master else [],
            master_epoch=self.master_epoch if master else 0,
        )

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_s
        self._connect(self.config.controllers[0])
        while self._running:
            sent = time.monotonic()
            try:
                resp = await self._stub.Heartbeat(self._request(), timeout=max(interval * 3, 1.0))
            except grpc.aio.AioRpcError as exc:
                logger.debug("controller %s: %s", self.controller, exc.code())
                self._next_controller()
                await asyncio.sleep(interval / 2)
                continue
            if not resp.active:
                self._next_controller(resp.active_controller)
                await asyncio.sleep(interval / 3)
                continue
            try:
                await self._apply(resp, sent)
            except Exception:
                logger.exception("applying the controller's answer failed")
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - sent)))

    async def _fence_loop(self) -> None:
        # Internal writers (timers, transactions) go through the store's gate: close it when the
        # lease runs out even if no heartbeat answer ever comes back.
        while self._running:
            if self.store.writable and not self.writable():
                self.store.writable = False
                self.service.controller_sss = set()
                self.service.fail_waiters()
                logger.warning("write lease expired: not accepting writes")
            await asyncio.sleep(0.05)

    async def _apply(self, resp: c.BrokerHeartbeatResponse, sent: float) -> None:
        self.master_alive = resp.master_alive
        self.replica_addresses = list(resp.replicas)
        self.sync_state_set = list(resp.sync_state_set)
        if resp.role == c.MASTER:
            if self.role != c.MASTER or self.master_epoch != resp.master_epoch:
                await self._become_master(resp)
            self.service.controller_sss = set(resp.sync_state_set)
            self.lease_deadline = sent + resp.lease_ms / 1000
            if time.monotonic() < self.lease_deadline:
                self.store.writable = True
        elif resp.role == c.REPLICA:
            if (
                self.role != c.REPLICA
                or self.master_epoch != resp.master_epoch
                or self.master.ha_address != resp.master.ha_address
            ):
                await self._become_replica(resp)
            self.master = resp.master

    async def _become_master(self, resp: c.BrokerHeartbeatResponse) -> None:
        self.store.writable = False
        if self.client is not None:
            await self.client.stop()
            self.client = None
        start = self.store.max_physical_offset
        if self.epochs.last_epoch < resp.master_epoch:
            self.epochs.begin_epoch(resp.master_epoch, start)
        self.role = c.MASTER
        self.master = resp.master
        self.master_epoch = resp.master_epoch
        self.service.start_serving(resp.master_epoch)
        logger.warning("now MASTER of %s (epoch %d, offset %d)", self.config.group, resp.master_epoch, start)
        if self.on_promoted is not None:
            self.on_promoted()
        self._role_changed(resp.master_epoch)

    async def _become_replica(self, resp: c.BrokerHeartbeatResponse) -> None:
        was_master = self.role == c.MASTER
        self.store.writable = False
        self.lease_deadline = 0.0
        self.role = c.REPLICA
        self.master = resp.master
        self.master_epoch = resp.master_epoch
        self.service.stop_serving()
        if self.client is not None:
            await self.client.stop()
        self.client = HAClient(
            self.store,
            self.epochs,
            self.config.group,
            self.config.node,
            resp.master.ha_address,
            self.apply_meta,
            key=self.config.key,
            on_truncated=self.on_truncated,
        )
        self.client.start()
        logger.warning(
            "now REPLICA of %s, following %s (epoch %d%s)",
            self.config.group,
            resp.master.node,
            resp.master_epoch,
            ", was master" if was_master else "",
        )
        self._role_changed(resp.master_epoch)

    def _role_changed(self, epoch: int) -> None:
        # The first role a node takes after starting is no change for the clients.
        first, self._seen_epoch = self._seen_epoch == 0, epoch
        if not first and self.on_role_change is not None:
            try:
                self.on_role_change()
            except Exception:
                logger.exception("role change hook failed")

    #
    # Status
    #

    def status(self) -> dict[str, Any]:
        store = self.store
        max_offset = store.max_physical_offset
        replicas = []
        if self.role == c.MASTER:
            counted = {r.node for r in self.service.counted_replicas()}
            for r in sorted(self.service.replicas.values(), key=lambda r: r.node):
                replicas.append(
                    {
                        "node": r.node,
                        "ha_address": r.peer,
                        "confirmed_offset": r.confirmed,
                        "lag_bytes": max(0, max_offset - r.confirmed),
                        "in_sync": r.node in counted,
                        "lag_p99_ms": r.lag_p99_ms(),
                    }
                )
        return {
            "group": self.config.group,
            "node": self.config.node,
            "address": self.config.address,
            "role": c.Role.Name(self.role) if self.role else "UNKNOWN",
            "epoch": self.epochs.last_epoch,
            "max_offset": max_offset,
            "master": self.master.node,
            "master_address": self.master.address,
            "sync_state_set": list(self.sync_state_set),
            "writable": self.writable(),
            "replicas": replicas,
            "controller": self.controller,
        }
