"""The controller process: the lease loop, heartbeats, elections and the ``mqcloud.ha.v1`` service.

Only the lease holder decides. It keeps liveness in memory (heartbeats are not written to the
database) and writes a group only when its master, epoch or SyncStateSet changes, in a transaction
guarded by the lease (store.py). A standby answers heartbeats with ``active = false`` and the
active controller's id, and re-reads the database when it takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import grpc

from dataplane.ha.controller.elect import Liveness, choose_master, master_lapsed
from dataplane.ha.controller.settings import ControllerSettings
from dataplane.ha.controller.store import ControllerStore, GroupRecord, NodeRecord
from mqcloud.ha.v1 import controller_pb2 as c
from mqcloud.ha.v1 import controller_pb2_grpc

__all__ = ("Controller", "ControllerServer")

logger = logging.getLogger(__name__)


class Controller:
    """Election state machine of one controller process (methods run on its event loop)."""

    def __init__(self, settings: ControllerSettings, store: ControllerStore) -> None:
        self.settings = settings
        self.store = store
        self.identity = settings.identity
        self.active = False
        self.active_since = 0.0
        self.active_controller = ""
        self.groups: dict[str, GroupRecord] = {}
        self.nodes: dict[tuple[str, str], NodeRecord] = {}
        self.liveness: dict[tuple[str, str], Liveness] = {}
        self._last_renew = 0.0
        self._db_lock = asyncio.Lock()
        # one decision at a time: an election and a SyncStateSet change must not interleave
        self._decide = asyncio.Lock()

    async def _db(self, fn: Any, *args: Any) -> Any:
        async with self._db_lock:
            return await asyncio.to_thread(fn, *args)

    #
    # Lease
    #

    async def tick(self) -> None:
        now = time.monotonic()
        s = self.settings
        if now - self._last_renew >= s.lease_ttl_s / 3 or not self.active:
            try:
                held = await self._db(self.store.acquire_lease, self.identity, time.time(), s.lease_ttl_s)
            except Exception:
                logger.exception("controller lease renewal failed")
                held = False
            self._last_renew = now
            if held and not self.active:
                self.groups, self.nodes = await self._db(self.store.load)
                self.liveness.clear()
                self.active = True
                self.active_since = time.monotonic()
                logger.info("controller %s is now active (%d groups)", self.identity, len(self.groups))
            elif not held and self.active:
                self.active = False
                logger.warning("controller %s lost the lease; standby", self.identity)
            if not held:
                self.active_controller = await self._db(self.store.lease_holder, time.time())
            else:
                self.active_controller = self.identity
        if self.active:
            for name in list(self.groups):
                async with self._decide:
                    record = self.groups.get(name)
                    if record is not None and self.active:
                        await self._check_master(record)

    async def _check_master(self, record: GroupRecord) -> None:
        s = self.settings
        now = time.monotonic()
        if record.master:
            seen = self.liveness.get((record.group, record.master))
            master_seen = seen.last_heartbeat if seen else None
            if not master_lapsed(master_seen, self.active_since, now, s.master_timeout_s):
                return
            reference = max(master_seen or self.active_since, self.active_since)
        else:
            reference = self.active_since
        nodes = {n: info for (g, n), info in self.liveness.items() if g == record.group}
        chosen = choose_master(
            record.sync_state_set,
            record.master,
            nodes,
            reference,
            now,
            alive_s=s.master_timeout_s,
            lease_s=s.broker_lease_s,
        )
        if chosen is None:
            return
        new = GroupRecord(
            record.group, chosen, record.master_epoch + 1, [chosen], record.sync_state_set_epoch + 1
        )
        if await self._save(new):
            logger.warning(
                "group %s: master %s lapsed; elected %s (epoch %d, offset %d)",
                record.group,
                record.master or "-",
                chosen,
                new.master_epoch,
                nodes[chosen].max_offset,
            )

    async def _save(self, record: GroupRecord) -> bool:
        ok = bool(await self._db(self.store.save_group, record, self.identity, time.time()))
        if ok:
            self.groups[record.group] = record
        else:
            self.active = False
            logger.warning("controller %s: lease lost while writing group %s", self.identity, record.group)
        return ok

    #
    # Heartbeats
    #

    async def heartbeat(self, req: c.BrokerHeartbeatRequest) -> c.BrokerHeartbeatResponse:
        if not self.active:
            return c.BrokerHeartbeatResponse(active=False, active_controller=self.active_controller)
        group, node = req.group, req.self.node
        key = (group, node)
        self.liveness[key] = Liveness(time.monotonic(), req.max_offset, req.epoch)
        known = self.nodes.get(key)
        fresh = NodeRecord(group, node, req.self.address, req.self.ha_address)
        if known != fresh:
            await self._db(self.store.save_node, fresh)
            self.nodes[key] = fresh
        async with self._decide:
            if not self.active:
                return c.BrokerHeartbeatResponse(active=False, active_controller=self.active_controller)
            return await self._decide_heartbeat(req, group, node)

    async def _decide_heartbeat(
        self, req: c.BrokerHeartbeatRequest, group: str, node: str
    ) -> c.BrokerHeartbeatResponse:
        record = self.groups.get(group)
        if record is None:
            # A new group: its first node is the master; nothing was acknowledged yet, nothing is lost.
            record = GroupRecord(group, node, max(req.epoch, 0) + 1, [node], 1)
            if not await self._save(record):
                return c.BrokerHeartbeatResponse(active=False, active_controller=self.active_controller)
            logger.info("group %s: first node %s is master (epoch %d)", group, node, record.master_epoch)
        if node == record.master and req.role == c.MASTER and req.master_epoch == record.master_epoch:
            alive = {n for (g, n) in self._alive(group)}
            proposed = sorted({node} | {r for r in req.in_sync_replicas if r in alive})
            if proposed != sorted(record.sync_state_set):
                changed = GroupRecord(
                    group, node, record.master_epoch, proposed, record.sync_state_set_epoch + 1
                )
                if not await self._save(changed):
                    return c.BrokerHeartbeatResponse(active=False, active_controller=self.active_controller)
                logger.info("group %s: SyncStateSet %s", group, proposed)
                record = changed
        return self._answer(record, node)

    def _alive(self, group: str) -> list[tuple[str, str]]:
        now = time.monotonic()
        limit = self.settings.master_timeout_s
        return [k for k, v in self.liveness.items() if k[0] == group and now - v.last_heartbeat <= limit]

    def _address(self, group: str, node: str) -> c.NodeAddress:
        rec = self.nodes.get((group, node))
        if rec is None:
            return c.NodeAddress(node=node)
        return c.NodeAddress(node=node, address=rec.address, ha_address=rec.ha_address)

    def _answer(self, record: GroupRecord, node: str) -> c.BrokerHeartbeatResponse:
        alive = self._alive(record.group)
        master_alive = any(n == record.master for _, n in alive) if record.master else False
        resp = c.BrokerHeartbeatResponse(
            active=True,
            active_controller=self.identity,
            role=c.MASTER if node == record.master else c.REPLICA if record.master else c.ROLE_UNSPECIFIED,
            master=self._address(record.group, record.master),
            master_epoch=record.master_epoch,
            sync_state_set=sorted(record.sync_state_set),
            master_alive=master_alive,
            replicas=[self._address(record.group, n) for _, n in sorted(alive) if n != record.master],
        )
        if node == record.master:
            resp.lease_ms = int(self.settings.broker_lease_s * 1000)
        return resp

    def groups_state(self, group: str) -> list[c.GroupState]:
        now = time.monotonic()
        out = []
        for record in sorted(self.groups.values(), key=lambda r: r.group):
            if group and record.group != group:
                continue
            state = c.GroupState(
                group=record.group,
                master=record.master,
                master_epoch=record.master_epoch,
                sync_state_set=sorted(record.sync_state_set),
                sync_state_set_epoch=record.sync_state_set_epoch,
            )
            for (g, n), _ in sorted(self.nodes.items()):
                if g != record.group:
                    continue
                live = self.liveness.get((g, n))
                ago = now - live.last_heartbeat if live else -1.0
                state.nodes.append(
                    c.NodeState(
                        address=self._address(g, n),
                        role=c.MASTER if n == record.master else c.REPLICA,
                        alive=live is not None and ago <= self.settings.master_timeout_s,
                        max_offset=live.max_offset if live else 0,
                        epoch=live.epoch if live else 0,
                        last_heartbeat_ms_ago=int(ago * 1000) if live else -1,
                    )
                )
            out.append(state)
        return out


class ControllerServicer(controller_pb2_grpc.ControllerServicer):  # type: ignore[misc]
    """``mqcloud.ha.v1.Controller`` over one :class:`Controller`."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    async def Heartbeat(self, request: c.BrokerHeartbeatRequest, context: Any) -> c.BrokerHeartbeatResponse:
        if not request.group or not request.self.node:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "group and self.node are required")
        return await self.controller.heartbeat(request)

    async def GetGroups(self, request: c.GetGroupsRequest, context: Any) -> c.GetGroupsResponse:
        ctl = self.controller
        return c.GetGroupsResponse(
            active=ctl.active,
            active_controller=ctl.active_controller,
            controller_id=ctl.identity,
            groups=ctl.groups_state(request.group) if ctl.active else [],
        )


class ControllerServer:
    """gRPC server + lease/election loop of one controller process."""

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings
        self.store = ControllerStore(settings.db)
        self.controller = Controller(settings, self.store)
        self.server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        controller_pb2_grpc.add_ControllerServicer_to_server(ControllerServicer(self.controller), self.server)
        self.port = 0
        self._loop_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.port = self.server.add_insecure_port(self.settings.listen)
        if self.port == 0:
            raise OSError(f"cannot listen on {self.settings.listen}")
        await self.server.start()
        await self.controller.tick()
        self._loop_task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.tick_s)
            try:
                await self.controller.tick()
            except Exception:
                logger.exception("controller tick failed")

    async def stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        await self.server.stop(1)
        if self.controller.active:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.store.release_lease, self.controller.identity)
        self.store.close()
