"""mqcloud.admin.v1.TierAdmin: the tiered-storage status of this node (docs/tiered-storage.md)."""

from __future__ import annotations

from typing import Any

import grpc

from dataplane.broker import Broker
from dataplane.store.tiered import TieredMessageStore
from mqcloud.admin.v1 import tier_pb2 as t
from mqcloud.admin.v1 import tier_pb2_grpc

__all__ = ("TierAdminServicer", "add_tier_admin")


class TierAdminServicer(tier_pb2_grpc.TierAdminServicer):  # type: ignore[misc]
    """Read-only view of the tier; FAILED_PRECONDITION when the node does not tier."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def GetTierStatus(self, request: t.GetTierStatusRequest, context: Any) -> t.GetTierStatusResponse:
        store = self.broker.store
        if not isinstance(store, TieredMessageStore):
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "tiered storage is not enabled (MQ_BROKER_TIER_ENABLED)"
            )
            raise AssertionError("unreachable: abort raises")
        st = store.tier_status()
        prefix = f"{request.namespace}%" if request.namespace else ""
        return t.GetTierStatusResponse(
            url=st.url,
            manifest_loaded=st.manifest_loaded,
            is_master=st.is_master,
            manifest_generation=st.manifest_generation,
            tiered_segments=st.tiered_segments,
            tiered_bytes=st.tiered_bytes,
            tiered_min_offset=st.tiered_min_offset,
            tiered_end_offset=st.tiered_end_offset,
            local_segments=st.local_segments,
            local_bytes=st.local_bytes,
            local_min_offset=st.local_min_offset,
            max_offset=st.max_offset,
            confirmed_offset=st.confirmed_offset,
            offload_lag_bytes=st.offload_lag_bytes,
            offload_lag_seconds=st.offload_lag_seconds,
            segments_offloaded=st.segments_offloaded,
            segments_expired=st.segments_expired,
            offload_failures=st.offload_failures,
            last_error=st.last_error,
            last_error_ms=st.last_error_ms,
            last_success_ms=st.last_success_ms,
            cache_hits=st.cache_hits,
            cache_misses=st.cache_misses,
            cache_hit_rate=st.cache_hit_rate,
            cache_bytes=st.cache_bytes,
            cache_capacity_bytes=st.cache_capacity_bytes,
            prefetched_blocks=st.prefetched_blocks,
            topics=[
                t.TopicTierBytes(topic=x.topic, local_bytes=x.local_bytes, tiered_bytes=x.tiered_bytes)
                for x in st.topics
                if x.topic.startswith(prefix)
            ],
        )


def add_tier_admin(broker: Broker, server: grpc.aio.Server) -> None:
    """Register TierAdmin on ``server`` (one line in ``dataplane.server``)."""
    tier_pb2_grpc.add_TierAdminServicer_to_server(TierAdminServicer(broker), server)
