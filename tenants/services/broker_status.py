"""What each node of a broker group says about itself: its HA state (role, epoch, SyncStateSet,
replication lag) from the ClusterAdmin API and its tiered storage from the TierAdmin API.

Read-only, for the operators' broker group page. A node that does not answer is reported with the
reason and what to check, never as an error of the page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from tenants.models import BrokerGroup, BrokerNode

__all__ = ("NodeState", "TierState", "broker_group_status")

# An operator page waits at most this long per node and API; a hung broker must not hang the page.
STATUS_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class TierState:
    """A node's tiered storage: what is hot on its disks and what is in the object store."""

    url: str
    is_master: bool
    manifest_loaded: bool
    local_segments: int
    local_bytes: int
    tiered_segments: int
    tiered_bytes: int
    offload_lag_bytes: int
    offload_lag_seconds: float
    offload_failures: int
    last_error: str


@dataclass(slots=True)
class NodeState:
    """One registered node as it answers now; ``error`` says why when it does not."""

    node: BrokerNode
    reachable: bool = False
    error: str = ""
    ha_name: str = ""
    role: str = ""
    epoch: int = 0
    max_offset: int = 0
    master: str = ""
    writable: bool = False
    min_in_sync_replicas: int = 0
    sync_state_set: list[str] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)  # a master's view of its replicas
    in_sync: bool | None = None  # None: not replicated (standalone) or unknown
    replication_lag_bytes: int | None = None  # replicas only, from their master's view
    replication_lag_p99_ms: float | None = None
    tier: TierState | None = None
    tier_note: str = ""

    @property
    def health(self) -> str:
        """``healthy``, ``degraded`` (answers, but a replica out of sync or a master without lease)
        or ``unreachable``."""
        if not self.reachable:
            return "unreachable"
        if self.role == "MASTER" and not self.writable:
            return "degraded"
        if self.in_sync is False:
            return "degraded"
        return "healthy"


def _credentials() -> tuple[str | None, bytes | None]:
    token = getattr(settings, "BROKER_ADMIN_TOKEN", None)
    ca_file = getattr(settings, "BROKER_TLS_CA_FILE", None)
    return token, Path(ca_file).read_bytes() if ca_file else None


def _unreachable_reason(code: str, message: str) -> str:
    if code == "UNAVAILABLE":
        return (
            f"The node did not answer ({message or 'connection refused'}). Check that the broker "
            "process runs and listens on this endpoint, and that the control plane can reach it."
        )
    if code == "DEADLINE_EXCEEDED":
        return f"The node did not answer within {STATUS_TIMEOUT_S:.0f} s: it may be overloaded or paused."
    if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return (
            "The node refused the control plane's operator credential: MQ_BROKER_ADMIN_TOKEN must "
            "match the broker's."
        )
    return f"The node answered {code}: {message}"


def _cluster_state(state: NodeState, status: dict[str, Any]) -> None:
    node = status.get("node", {})
    state.reachable = True
    state.ha_name = node.get("node", "")
    state.role = node.get("role", "") or "STANDALONE"
    state.epoch = int(node.get("epoch", 0))
    state.max_offset = int(node.get("max_offset", 0))
    state.master = node.get("master", "")
    state.writable = bool(node.get("writable", False))
    state.min_in_sync_replicas = int(node.get("min_in_sync_replicas", 0))
    state.sync_state_set = list(node.get("sync_state_set", []))
    state.replicas = list(node.get("replicas", []))


def _tier_state(state: NodeState, client: Any) -> None:
    from mqcloud.admin_client import BrokerAdminError

    try:
        st = client.status()
    except BrokerAdminError as exc:
        state.tier_note = (
            "Tiered storage is off on this node (MQ_BROKER_TIER_ENABLED)."
            if exc.code == "FAILED_PRECONDITION"
            else f"Tiered storage status unavailable: {exc.code} {exc.message}".strip()
        )
        return
    state.tier = TierState(
        url=st.url,
        is_master=st.is_master,
        manifest_loaded=st.manifest_loaded,
        local_segments=st.local_segments,
        local_bytes=st.local_bytes,
        tiered_segments=st.tiered_segments,
        tiered_bytes=st.tiered_bytes,
        offload_lag_bytes=st.offload_lag_bytes,
        offload_lag_seconds=st.offload_lag_seconds,
        offload_failures=st.offload_failures,
        last_error=st.last_error,
    )


def _ask(node: BrokerNode) -> NodeState:
    from mqcloud.admin_client import BrokerAdminError
    from mqcloud.admin_cluster import ClusterAdminClient
    from mqcloud.admin_tier import TierAdminClient

    state = NodeState(node)
    token, ca = _credentials()
    with ClusterAdminClient(node.endpoint, STATUS_TIMEOUT_S, token=token, root_certificates=ca) as cluster:
        try:
            _cluster_state(state, cluster.status())
        except BrokerAdminError as exc:
            state.error = _unreachable_reason(exc.code, exc.message)
            return state
    with TierAdminClient(node.endpoint, timeout=STATUS_TIMEOUT_S, token=token, root_certificates=ca) as tier:
        _tier_state(state, tier)
    return state


def _replication(states: list[NodeState]) -> None:
    """Each replica's lag and in-sync flag, as its master sees them (the replica cannot know)."""
    masters = [s for s in states if s.reachable and s.role == "MASTER"]
    if not masters:
        return
    master = max(masters, key=lambda s: s.epoch)  # a stale master of an older epoch may still answer
    replicas = {r.get("node", ""): r for r in master.replicas}
    for s in states:
        if not s.reachable or s.role == "STANDALONE":
            continue
        if s is master:
            s.in_sync = True
            continue
        seen = replicas.get(s.ha_name)
        s.in_sync = s.ha_name in master.sync_state_set
        if seen is not None:
            s.replication_lag_bytes = int(seen.get("lag_bytes", 0))
            s.replication_lag_p99_ms = float(seen.get("lag_p99_ms", 0.0))


def broker_group_status(group: BrokerGroup) -> list[NodeState]:
    """Every registered node of the group (enabled or not), asked now, in broker id order."""
    states = [_ask(node) for node in group.nodes.order_by("broker_id", "name")]
    _replication(states)
    return states
