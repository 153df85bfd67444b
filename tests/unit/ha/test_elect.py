"""Election policy: SyncStateSet only, freshest heartbeat required, most data wins, never unclean."""

from __future__ import annotations

from dataplane.ha.controller.elect import Liveness, choose_master, master_lapsed

NOW = 100.0


def test_master_lapsed_counts_from_activation() -> None:
    assert master_lapsed(90.0, 0.0, NOW, 2.5)
    assert not master_lapsed(98.0, 0.0, NOW, 2.5)
    # a controller that just became active waits a full timeout even for a master it never saw
    assert not master_lapsed(None, 99.0, NOW, 2.5)
    assert not master_lapsed(10.0, 99.0, NOW, 2.5)
    assert master_lapsed(None, 97.0, NOW, 2.5)


def test_most_data_in_sync_state_set_wins() -> None:
    nodes = {
        "n1": Liveness(99.9, 5000, 3),
        "n2": Liveness(99.9, 7000, 3),
        "n3": Liveness(99.9, 9000, 3),  # most data, but not in the SyncStateSet
    }
    chosen = choose_master(["n0", "n1", "n2"], "n0", nodes, 95.0, NOW, alive_s=2.5, lease_s=1.5)
    assert chosen == "n2"


def test_stale_or_dead_candidates_are_skipped() -> None:
    nodes = {
        "n1": Liveness(96.0, 9000, 3),  # reported before the old master's lease ended (95 + 1.5)
        "n2": Liveness(90.0, 9000, 3),  # dead
        "n3": Liveness(99.0, 100, 3),
    }
    assert choose_master(["n0", "n1", "n2", "n3"], "n0", nodes, 95.0, NOW, alive_s=2.5, lease_s=1.5) == "n3"


def test_no_eligible_node_means_no_master() -> None:
    nodes = {"n1": Liveness(99.9, 9000, 3)}
    assert choose_master(["n0"], "n0", nodes, 95.0, NOW, alive_s=2.5, lease_s=1.5) is None
    assert choose_master(["n0", "n1"], "n0", {}, 95.0, NOW, alive_s=2.5, lease_s=1.5) is None


def test_newer_epoch_beats_more_bytes() -> None:
    nodes = {"n1": Liveness(99.9, 9000, 2), "n2": Liveness(99.9, 100, 3)}
    assert choose_master(["n0", "n1", "n2"], "n0", nodes, 95.0, NOW, alive_s=2.5, lease_s=1.5) == "n2"
