"""A thin client of a broker's tiered-storage admin API (``mqcloud.admin.v1.TierAdmin``).

Used by ``mqctl admin tier``. grpcio + protobuf only; errors are :class:`BrokerAdminError`.
"""

from __future__ import annotations

from types import TracebackType

import grpc

from mqcloud.admin.v1 import tier_pb2 as t
from mqcloud.admin.v1 import tier_pb2_grpc
from mqcloud.admin_client import BrokerAdminError, admin_channel, operator_metadata

__all__ = ("TierAdminClient",)


class TierAdminClient:
    """``TierAdminClient("127.0.0.1:8081").status()``."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = 10.0,
        channel: grpc.Channel | None = None,
        token: str | None = None,
        root_certificates: bytes | None = None,
    ) -> None:
        self._own_channel = channel is None
        self._channel = channel or admin_channel(target, root_certificates=root_certificates)
        self._stub = tier_pb2_grpc.TierAdminStub(self._channel)
        self._timeout = timeout
        self._metadata = operator_metadata(token)

    def status(self, namespace: str = "") -> t.GetTierStatusResponse:
        try:
            response: t.GetTierStatusResponse = self._stub.GetTierStatus(
                t.GetTierStatusRequest(namespace=namespace), timeout=self._timeout, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            raise BrokerAdminError(code.name if code else "UNKNOWN", exc.details() or "") from exc  # type: ignore[attr-defined]
        return response

    def close(self) -> None:
        if self._own_channel:
            self._channel.close()

    def __enter__(self) -> TierAdminClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
