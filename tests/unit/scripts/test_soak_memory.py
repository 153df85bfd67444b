"""The soak's memory check: a leak in any incarnation old enough to judge fails the run; a node
restarted near the end, still catching up, does not."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"
MiB = 1 << 20


@pytest.fixture(scope="module")
def soak() -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))  # soak.py imports its neighbour cluster_local
    try:
        spec = importlib.util.spec_from_file_location("soak_under_test", SCRIPTS / "soak.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look themselves up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPTS))


def _life(pid: int, start: float, seconds: int, begin_mib: int, end_mib: int) -> list[tuple[float, int, int]]:
    """Samples every 5 s growing linearly from begin to end."""
    steps = seconds // 5
    return [
        (start + 5 * i, pid, (begin_mib + (end_mib - begin_mib) * i // max(steps, 1)) * MiB)
        for i in range(steps + 1)
    ]


def test_a_steady_node_passes(soak: ModuleType) -> None:
    summary, growing = soak._memory_summary({"b0": _life(10, 0, 600, 100, 140)})
    assert growing == []
    first, last, peak = summary["b0"]
    assert last == 140 * MiB and peak == 140 * MiB
    assert 100 * MiB < first < 110 * MiB  # the first sample 30 s in, after the warm-up


def test_a_growing_heap_fails(soak: ModuleType) -> None:
    _, growing = soak._memory_summary({"b0": _life(10, 0, 600, 100, 600)})
    assert growing == ["b0"]


def test_a_leak_in_an_earlier_incarnation_fails_even_after_a_restart(soak: ModuleType) -> None:
    points = _life(10, 0, 600, 100, 600) + _life(11, 605, 300, 100, 110)
    _, growing = soak._memory_summary({"b0": points})
    assert growing == ["b0"]


def test_a_node_restarted_near_the_end_is_judged_on_its_long_life(soak: ModuleType) -> None:
    # The last incarnation starts 40 s before the end and quadruples while it catches up.
    points = _life(10, 0, 1700, 300, 340) + _life(11, 1705, 40, 100, 400)
    summary, growing = soak._memory_summary({"b0": points})
    assert growing == []
    assert summary["b0"][1] == 340 * MiB  # the end of the incarnation judged
    assert summary["b0"][2] == 400 * MiB  # the peak counts every incarnation


def test_the_probe_reads_anonymous_memory_of_a_live_process(soak: ModuleType) -> None:
    import os

    anon = soak.rss_bytes(os.getpid())
    assert anon is not None and anon > 1 * MiB
    assert soak.rss_bytes(2**22 + 7) is None  # no such pid
