"""The ``loop_cpu`` setting: the event loop's thread and gRPC's polling thread on one CPU, every other
thread of the process on all its CPUs (dataplane/loop_cpu.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from dataplane.config import BrokerSettings
from dataplane.loop_cpu import LoopCpu, Placements, choose_cpu, current_cpu, parse_loop_cpu, process_started

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("text", "value"), [("", ""), ("auto", "auto"), (" AUTO ", "auto"), ("3", "3")])
def test_settings_read(text: str, value: str) -> None:
    assert parse_loop_cpu(text) == value
    assert BrokerSettings(loop_cpu=text).loop_cpu == value


@pytest.mark.parametrize("text", ["x", "-1", "0-1", "0,1", "1.5"])
def test_what_is_not_a_cpu_is_refused_with_a_line_for_people(text: str) -> None:
    with pytest.raises(ValueError, match="loop_cpu"):
        parse_loop_cpu(text)
    with pytest.raises(ValidationError, match="loop_cpu"):
        BrokerSettings(loop_cpu=text)


def test_the_cpu_chosen() -> None:
    assert BrokerSettings().loop_cpu == "auto"  # on unless turned off
    assert choose_cpu("", {0, 1}) is None  # off
    assert choose_cpu("auto", {0}) is None and choose_cpu("0", {0}) is None  # one CPU: nothing to do
    assert choose_cpu("1", {0, 1}) == 1
    with pytest.raises(ValueError, match="loop_cpu 5 is not a CPU this process may run on"):
        choose_cpu("5", {0, 1})
    allowed = os.sched_getaffinity(0)
    if len(allowed) > 1:  # auto: the CPU this thread is on
        assert choose_cpu("auto", allowed) in allowed
    assert current_cpu() in set(range(os.cpu_count() or 1))


_PROBE = """
import asyncio, json, os, sys, threading
import grpc
from dataplane.loop_cpu import LoopCpu

def cpus(tid):
    return sorted(os.sched_getaffinity(tid))

async def main():
    server = grpc.aio.server()
    server.add_insecure_port("127.0.0.1:0")
    await server.start()
    keeper = LoopCpu(int(sys.argv[1]))
    assert keeper.start(asyncio.get_running_loop())
    pollers = sorted(keeper.pollers())
    seen = {}
    started = threading.Event()
    def later():
        seen["started by the loop"] = cpus(0)
        started.set()
        threading.Event().wait(3)
    threading.Thread(target=later, daemon=True).start()  # inherits the loop's CPU
    started.wait(5)
    seen["executor worker"] = await asyncio.to_thread(cpus, 0)
    await asyncio.sleep(1.5)  # a sweep
    hot = {threading.get_native_id(), *pollers}
    others = [int(t) for t in os.listdir("/proc/self/task") if int(t) not in hot]
    print(json.dumps({
        "loop": cpus(0), "pollers": [cpus(t) for t in pollers], "first": seen,
        "others after a sweep": sorted({tuple(cpus(t)) for t in others}),
        "everywhere": sorted(keeper.everywhere),
    }))
    keeper.stop()
    await server.stop(None)

asyncio.run(main())
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a machine with 2 CPUs or more")
def test_the_loop_and_the_poller_keep_to_the_cpu_and_the_threads_they_start_do_not() -> None:
    cpu = max(os.sched_getaffinity(0))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(cpu)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    everywhere = found["everywhere"]
    assert everywhere == sorted(os.sched_getaffinity(0))
    assert found["loop"] == [cpu]
    assert found["pollers"] == [[cpu]]  # grpc.aio's polling thread found by its name, and kept there
    # a thread the loop starts inherits its CPU until the next sweep; the executor's widen at once
    assert found["first"] == {"started by the loop": [cpu], "executor worker": everywhere}
    assert found["others after a sweep"] == [everywhere]


@pytest.fixture
def others() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Running processes to stand for other nodes of the host (their pids and start times are real)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait(10)


def _node(others: list[subprocess.Popen[bytes]]) -> str:
    process = subprocess.Popen(["sleep", "60"])
    others.append(process)
    return f"{process.pid} {process_started(process.pid)}"


def test_auto_takes_the_cpu_the_fewest_other_nodes_keep_their_loops_on(
    tmp_path: Path, others: list[subprocess.Popen[bytes]]
) -> None:
    placements = Placements(tmp_path / "placements")
    placements.path.write_text(f"{_node(others)} 0\n{_node(others)} 0\n{_node(others)} 1\n")
    assert placements.claim({0, 1, 2}, preferred=0) == 2  # nobody's
    assert placements.claim({0, 1}, preferred=0) == 1  # (noted again: one line per process)
    lines = placements.path.read_text().splitlines()
    assert len(lines) == 4 and lines[-1] == f"{os.getpid()} {process_started(os.getpid())} 1"
    # as many on each: the CPU the loop is on stays
    placements.path.write_text(f"{_node(others)} 0\n{_node(others)} 1\n")
    assert placements.claim({0, 1}, preferred=1) == 1
    assert placements.claim({0, 1}, preferred=0) == 0


def test_gone_processes_and_damaged_lines_count_for_nothing(
    tmp_path: Path, others: list[subprocess.Popen[bytes]]
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait(10)
    reused = _node(others).split()[0]  # a running pid with another start time: a reused pid
    alive = _node(others)
    placements = Placements(tmp_path / "placements")
    placements.path.write_text(f"{gone.pid} 5 0\n{reused} 1 0\nnot a line\n{alive} 1\n")
    assert placements.claim({0, 1}, preferred=1) == 0
    assert placements.path.read_text() == f"{alive} 1\n{os.getpid()} {process_started(os.getpid())} 0\n"


def test_a_named_cpu_is_kept_and_noted_and_a_stopping_node_takes_its_line_out(
    tmp_path: Path, others: list[subprocess.Popen[bytes]]
) -> None:
    alive = _node(others)
    placements = Placements(tmp_path / "placements")
    placements.path.write_text(f"{alive} 1\n")
    assert placements.claim({0, 1}, preferred=1, fixed=True) == 1  # named in the settings: kept
    assert placements.path.read_text().count(" 1\n") == 2
    keeper = LoopCpu(1, placements)
    keeper.stop()
    assert placements.path.read_text() == f"{alive} 1\n"
    assert keeper.placements is None  # taken out once
