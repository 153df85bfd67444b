"""Epoch file persistence and the consistent point a rejoining replica truncates to."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.ha.epoch import EpochEntry, EpochFileCache, consistent_point

E = EpochEntry


@pytest.mark.parametrize(
    ("replica", "replica_max", "master", "master_max", "expected"),
    [
        pytest.param([E(1, 0)], 500, [E(1, 0)], 800, 500, id="replica-behind-same-epoch"),
        pytest.param([E(1, 0)], 900, [E(1, 0), E(2, 700)], 1000, 700, id="old-master-divergent-tail"),
        pytest.param([E(1, 0), E(2, 700)], 750, [E(1, 0), E(2, 700)], 2000, 750, id="caught-up-prefix"),
        pytest.param(
            [E(1, 0), E(2, 700)], 900, [E(1, 0), E(3, 650)], 2000, 650, id="epoch-unknown-to-master"
        ),
        pytest.param([E(5, 0)], 900, [E(1, 0)], 2000, 0, id="no-common-epoch"),
        pytest.param([], 0, [E(1, 0)], 2000, 0, id="empty-replica"),
    ],
)
def test_consistent_point(
    replica: list[EpochEntry], replica_max: int, master: list[EpochEntry], master_max: int, expected: int
) -> None:
    assert consistent_point(replica, replica_max, master, master_max) == expected


def test_file_round_trip_and_begin_epoch(tmp_path: Path) -> None:
    path = tmp_path / "ha" / "epoch"
    cache = EpochFileCache(path)
    assert cache.entries == [] and cache.last_epoch == 0
    cache.begin_epoch(1, 0)
    cache.begin_epoch(2, 4096)
    assert path.read_text() == "1 0\n2 4096\n"
    again = EpochFileCache(path)
    assert again.entries == [E(1, 0), E(2, 4096)] and again.last_epoch == 2
    # an adopted entry past this node's data is replaced when it starts its own epoch there
    again.replace([E(1, 0), E(2, 4096), E(3, 9000)])
    again.begin_epoch(4, 5000)
    assert again.entries == [E(1, 0), E(2, 4096), E(4, 5000)]
    with pytest.raises(ValueError, match="older"):
        again.begin_epoch(3, 6000)
    again.truncate_from(4096)
    assert again.entries == [E(1, 0), E(2, 4096)]


def test_corrupt_file_says_what_it_expected(tmp_path: Path) -> None:
    path = tmp_path / "epoch"
    path.write_text("1 0\nnonsense\n")
    with pytest.raises(ValueError, match=r"epoch:2: expected '<epoch> <start offset>'"):
        EpochFileCache(path)
