"""Queue shares: how a node's part of a tenant's rate limit follows its part of the queues."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from dataplane.quota import QueueShares

PEER_COUNTS: dict[str, dict[str, int] | None] = {}


def fetch(peer: str) -> Mapping[str, int]:
    counts = PEER_COUNTS[peer]
    if counts is None:
        raise OSError("connection refused")
    return counts


def test_shares_follow_the_queues_and_survive_a_peer_outage() -> None:
    mine = {"acme%orders": 3, "acme%audit": 1, "globex%events": 2, "rmq_sys_TRACE_DATA": 1}
    PEER_COUNTS.update({"b": None, "c": {"acme%orders": 1, "globex%events": 2}})
    shares = QueueShares(lambda: mine, ["b", "c"], fetch)
    shares.refresh()
    # one peer never answered: the even split
    assert shares.of("acme") == pytest.approx(1 / 3) and shares.of("acme", "acme%orders") == pytest.approx(
        1 / 3
    )
    PEER_COUNTS["b"] = {"acme%orders": 4, "globex%events": 4}
    shares.refresh()
    assert shares.of("acme") == pytest.approx(4 / 9)  # 3+1 of 3+1+4+1
    assert shares.of("acme", "acme%orders") == pytest.approx(3 / 8)
    assert shares.of("acme", "acme%audit") == 1.0
    assert shares.of("globex") == pytest.approx(2 / 8)
    assert shares.of("initech") == pytest.approx(1 / 3)  # no queues anywhere: even
    # b goes down: its last counts are kept; c moves its queues away
    PEER_COUNTS["b"] = None
    PEER_COUNTS["c"] = {}
    shares.refresh()
    assert shares.of("acme") == pytest.approx(4 / 8)
    assert shares.of("globex") == pytest.approx(2 / 6)
