"""``mqcloud.admin.v1.ClusterAdmin``: this node's HA role, epoch, SyncStateSet and replica lag, plus
the controller's view of the whole group when a controller answers."""

from __future__ import annotations

import logging
from typing import Any

import grpc

from dataplane.broker import Broker
from dataplane.ha_writes import ha_status
from mqcloud.admin.v1 import cluster_pb2 as cl
from mqcloud.admin.v1 import cluster_pb2_grpc
from mqcloud.ha.v1 import controller_pb2 as c
from mqcloud.ha.v1 import controller_pb2_grpc

__all__ = ("ClusterAdminServicer",)

logger = logging.getLogger(__name__)


def _node_status(status: dict[str, Any]) -> cl.ClusterNodeStatus:
    replicas = [cl.ReplicaStatus(**r) for r in status.get("replicas", [])]
    fields = {k: v for k, v in status.items() if k != "replicas"}
    return cl.ClusterNodeStatus(replicas=replicas, **fields)


class ClusterAdminServicer(cluster_pb2_grpc.ClusterAdminServicer):  # type: ignore[misc]
    """Read-only cluster status for operators (``mqctl admin cluster status``)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def GetClusterStatus(
        self, request: cl.GetClusterStatusRequest, context: Any
    ) -> cl.GetClusterStatusResponse:
        status = ha_status(self.broker)
        response = cl.GetClusterStatusResponse(node=_node_status(status))
        ha = self.broker.ha
        if ha is None or not ha.controller:
            return response
        try:
            async with grpc.aio.insecure_channel(status.get("controller") or ha.controller) as channel:
                groups = await controller_pb2_grpc.ControllerStub(channel).GetGroups(
                    c.GetGroupsRequest(group=ha.config.group), timeout=2
                )
        except grpc.aio.AioRpcError as exc:
            logger.info("controller %s did not answer: %s", ha.controller, exc.code())
            return response
        for group in groups.groups:
            for node in group.nodes:
                response.group_nodes.append(
                    cl.ClusterNodeStatus(
                        group=group.group,
                        node=node.address.node,
                        address=node.address.address,
                        role=c.Role.Name(node.role) if node.alive else "DOWN",
                        epoch=node.epoch,
                        max_offset=node.max_offset,
                        master=group.master,
                        sync_state_set=list(group.sync_state_set),
                        controller=groups.controller_id,
                    )
                )
        return response
