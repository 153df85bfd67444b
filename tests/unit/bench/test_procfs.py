"""bench/procfs.py: the machine's stolen CPU time, the figure that tells a slow stretch of a shared VM."""

from __future__ import annotations

from bench import procfs

#        user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = [1000, 0, 200, 5000, 10, 0, 5, 300, 0, 0]


def test_steal_share_is_the_stolen_part_of_the_time_the_vcpus_wanted() -> None:
    # 1,000 ticks: 400 user, 100 system, 350 idle, 50 iowait, 100 stolen: 600 wanted, 100 of them stolen
    after = [1400, 0, 300, 5350, 60, 0, 5, 400, 50, 0]
    assert procfs.steal_share(BEFORE, after) == 100 / 600
    # the same stolen ticks on a busier machine are a smaller share of what it wanted
    busier = [1550, 0, 350, 5200, 10, 0, 5, 400, 0, 0]
    assert procfs.steal_share(BEFORE, busier) == 100 / 800
    quiet = [1500, 0, 300, 5500, 10, 0, 5, 300, 0, 0]
    assert procfs.steal_share(BEFORE, quiet) == 0.0


def test_steal_share_without_a_usable_reading_is_zero() -> None:
    assert procfs.steal_share([], BEFORE) == 0.0
    assert procfs.steal_share(BEFORE, BEFORE[:4]) == 0.0  # a kernel too old to count steal
    assert procfs.steal_share(BEFORE, BEFORE) == 0.0  # no time passed


def test_machine_cpu_times_reads_this_machine() -> None:
    first = procfs.machine_cpu_times()
    sum(range(200_000))  # some CPU time passes
    second = procfs.machine_cpu_times()
    assert len(first) >= 8 and len(second) == len(first)
    assert all(b >= a for a, b in zip(first, second, strict=True))
    assert 0.0 <= procfs.steal_share(first, second) <= 1.0
