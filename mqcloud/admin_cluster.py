"""A thin client of a broker's cluster status API (``mqcloud.admin.v1.ClusterAdmin``).

Used by ``mqctl admin cluster status``. grpcio + protobuf only. Errors surface as
:class:`mqcloud.admin_client.BrokerAdminError` carrying the gRPC status code name.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import grpc

from mqcloud.admin.v1 import cluster_pb2 as cl
from mqcloud.admin.v1 import cluster_pb2_grpc
from mqcloud.admin_client import BrokerAdminError, to_dict

__all__ = ("ClusterAdminClient",)


class ClusterAdminClient:
    """Reads one broker's HA view: its role, epoch, SyncStateSet, replicas and the group's nodes."""

    def __init__(self, target: str, timeout: float = 5.0) -> None:
        self.channel = grpc.insecure_channel(target)
        self.stub = cluster_pb2_grpc.ClusterAdminStub(self.channel)
        self.timeout = timeout

    def __enter__(self) -> ClusterAdminClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def status(self) -> dict[str, Any]:
        """``{"node": {...}, "group_nodes": [{...}, ...]}`` with the proto's field names."""
        try:
            response = self.stub.GetClusterStatus(cl.GetClusterStatusRequest(), timeout=self.timeout)
        except grpc.RpcError as exc:
            raise BrokerAdminError(exc.code().name, exc.details() or "") from exc
        return to_dict(response)
