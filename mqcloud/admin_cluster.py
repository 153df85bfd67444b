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
from mqcloud.admin_client import BrokerAdminError, admin_channel, operator_metadata, to_dict

__all__ = ("ClusterAdminClient",)


class ClusterAdminClient:
    """Reads one broker's HA view: its role, epoch, SyncStateSet, replicas and the group's nodes."""

    def __init__(
        self,
        target: str,
        timeout: float = 5.0,
        *,
        token: str | None = None,
        root_certificates: bytes | None = None,
    ) -> None:
        self.channel = admin_channel(target, root_certificates=root_certificates)
        self.stub = cluster_pb2_grpc.ClusterAdminStub(self.channel)
        self.timeout = timeout
        self.metadata = operator_metadata(token)

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
            response = self.stub.GetClusterStatus(
                cl.GetClusterStatusRequest(), timeout=self.timeout, metadata=self.metadata
            )
        except grpc.RpcError as exc:
            raise BrokerAdminError(exc.code().name, exc.details() or "") from exc
        return to_dict(response)
