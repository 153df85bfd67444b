"""dataplane.heap: start-up objects frozen out of the collector's walks, collection pauses timed."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from dataplane.heap import freeze_startup_heap, watch_gc_pauses


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the test session collects as usual


def _pauses(generation: int) -> float:
    return REGISTRY.get_sample_value("mq_gc_pause_seconds_count", {"generation": str(generation)}) or 0.0


def test_freeze_keeps_live_objects_out_of_full_collections(unfrozen: None) -> None:
    alive = [[i] for i in range(1000)]
    frozen = freeze_startup_heap()
    # frozen objects that die leave the permanent generation, and another thread (pytest-xdist's
    # execnet channel) may drop a few between the freeze and this reading: never more than were frozen
    assert len(alive) < gc.get_freeze_count() <= frozen
    assert frozen - gc.get_freeze_count() < 100
    assert REGISTRY.get_sample_value("mq_gc_frozen_objects") == frozen
    # a full collection no longer walks them: the tracked generations hold fewer objects than were frozen
    assert len(gc.get_objects()) < frozen
    # what is created afterwards is still collected, cycles included
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1


def test_every_collection_is_timed_once_however_often_watched() -> None:
    watch_gc_pauses()
    watch_gc_pauses()
    before = [_pauses(g) for g in range(3)]
    gc.collect(0)
    gc.collect(2)
    after = [_pauses(g) for g in range(3)]
    assert after[0] - before[0] >= 1
    assert after[2] - before[2] == 1  # one callback, not two
    assert REGISTRY.get_sample_value("mq_gc_pause_seconds_sum", {"generation": "2"}) > 0
