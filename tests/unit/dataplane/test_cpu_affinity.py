"""The ``cpu_affinity`` setting: CPU lists read and written, and applied to every thread."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from dataplane.config import BrokerSettings
from dataplane.cpu_affinity import apply_cpu_affinity, format_cpu_list, parse_cpu_list

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("text", "cpus", "formatted"),
    [
        ("0", {0}, "0"),
        ("0-3", {0, 1, 2, 3}, "0-3"),
        ("0, 2,4-5", {0, 2, 4, 5}, "0,2,4-5"),
        ("3,1", {1, 3}, "1,3"),
    ],
)
def test_cpu_lists_are_read_and_written(text: str, cpus: set[int], formatted: str) -> None:
    assert parse_cpu_list(text) == cpus
    assert format_cpu_list(cpus) == formatted


@pytest.mark.parametrize("text", ["a", "1,,2", "-1", "2-", "4-2", "0x1"])
def test_what_is_not_a_cpu_list_is_refused_with_a_line_for_people(text: str) -> None:
    with pytest.raises(ValueError, match="cpu_affinity"):
        parse_cpu_list(text)
    with pytest.raises(ValidationError, match="cpu_affinity"):
        BrokerSettings(cpu_affinity=text)


def test_empty_changes_nothing() -> None:
    before = os.sched_getaffinity(0)
    assert apply_cpu_affinity("") is None and apply_cpu_affinity("  ") is None
    assert os.sched_getaffinity(0) == before


def test_a_cpu_this_process_may_not_use_is_refused() -> None:
    missing = max(os.sched_getaffinity(0)) + 1
    before = os.sched_getaffinity(0)
    with pytest.raises(ValueError, match=f"CPU {missing} is not one this process may run on"):
        apply_cpu_affinity(f"{missing}")
    assert os.sched_getaffinity(0) == before  # nothing half-applied


_PROBE = """
import os, sys, threading
started = threading.Event()
early = threading.Thread(target=lambda: (started.set(), threading.Event().wait(5)), daemon=True)
early.start(); started.wait()
from dataplane.cpu_affinity import apply_cpu_affinity
cpus = apply_cpu_affinity(sys.argv[1])
late = threading.Thread(target=lambda: print(sorted(os.sched_getaffinity(0))))
late.start(); late.join()
tids = [int(tid) for tid in os.listdir("/proc/self/task")]
print(sorted(tuple(sorted(os.sched_getaffinity(tid))) for tid in tids))
"""


def test_every_thread_keeps_to_the_cpus_those_started_before_and_after() -> None:
    cpu = min(os.sched_getaffinity(0))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(cpu)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    late, every = done.stdout.splitlines()
    assert late == f"[{cpu}]"
    threads = every.count("(")
    assert threads >= 2 and every == str([(cpu,)] * threads)  # the main one and the one started before
