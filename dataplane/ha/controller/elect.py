"""Master election: only from the SyncStateSet, the most data first (RocketMQ ``DefaultElectPolicy``).

Pure functions over what the controller saw in heartbeats, so they are unit-tested without a
network. A candidate must be alive and must have reported *after* the old master's lease ran out:
then the offset it reported already includes every message the old master could have acknowledged
(an acknowledgement needs a confirmation from a SyncStateSet member before the lease ends).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ("Liveness", "choose_master", "master_lapsed")


@dataclass(slots=True)
class Liveness:
    """The last heartbeat of one node as the active controller saw it (monotonic seconds)."""

    last_heartbeat: float
    max_offset: int
    epoch: int


def master_lapsed(master_seen: float | None, active_since: float, now: float, timeout_s: float) -> bool:
    """True when the master has not heartbeat for ``timeout_s``. A controller that just became
    active counts from then: it cannot know what its predecessor saw."""
    reference = max(master_seen if master_seen is not None else active_since, active_since)
    return now - reference > timeout_s


def choose_master(
    sync_state_set: list[str],
    old_master: str,
    nodes: Mapping[str, Liveness],
    master_seen: float,
    now: float,
    *,
    alive_s: float,
    lease_s: float,
) -> str | None:
    """The new master or None (no eligible node: the group stays without a master, never unclean)."""
    eligible = []
    for name in sync_state_set:
        if name == old_master:
            continue
        info = nodes.get(name)
        if info is None or now - info.last_heartbeat > alive_s:
            continue
        if info.last_heartbeat < master_seen + lease_s:
            continue  # its offset may predate the last acknowledged write
        eligible.append((info.epoch, info.max_offset, name))
    if not eligible:
        return None
    eligible.sort(key=lambda e: (-e[0], -e[1], e[2]))
    return eligible[0][2]
