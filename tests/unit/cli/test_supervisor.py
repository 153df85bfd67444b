"""cli.supervisor: nothing it starts outlives it, setup steps included."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cli.supervisor import Child, Supervisor

REPO = Path(__file__).resolve().parents[3]

# A supervisor whose setup step (run_once) never ends on its own, as bootstrap retrying an API
# whose server is gone.
_SCRIPT = """
import sys
from pathlib import Path
from cli.supervisor import Supervisor
Supervisor(Path(sys.argv[1]), {}).run_once("step", ["sleep", "60"])
"""


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_setup_step_dies_with_a_killed_supervisor(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(tmp_path)], cwd=REPO, env=env)
    steps: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while not (steps := _children(proc.pid)):
            assert time.monotonic() < deadline and proc.poll() is None, "the step never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while _alive(steps[0]):
            assert time.monotonic() < deadline, "the setup step outlived its SIGKILLed supervisor"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in steps:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _watch_until(
    supervisor: Supervisor, done: Callable[[Child | None], bool], seconds: float = 20
) -> Child | None:
    """Call ``supervisor.watch()`` until ``done`` is true of its answer; that answer."""
    deadline = time.monotonic() + seconds
    while True:
        failing = supervisor.watch()
        if done(failing):
            return failing
        assert time.monotonic() < deadline, "the supervisor never got there"
        time.sleep(0.02)


def test_an_exited_child_is_restarted_with_a_growing_backoff_then_given_up_on(tmp_path: Path) -> None:
    said: list[str] = []
    supervisor = Supervisor(
        tmp_path,
        {},
        max_restarts=3,
        restart_window_s=60,
        first_backoff_s=0.1,
        max_backoff_s=0.3,
        notify=said.append,
    )
    steady = supervisor.start("steady", ["sleep", "60"])
    flaky = supervisor.start("flaky", [sys.executable, "-c", "print('run'); raise SystemExit(3)"])
    try:
        failing = _watch_until(supervisor, lambda failing: failing is not None)
        assert failing is flaky
        # three restarts, each after a longer wait (0.1, 0.2, then capped at 0.3 s), then given up
        assert len(flaky.restarts) == 3
        gaps = [b - a for a, b in itertools.pairwise(flaky.restarts)]
        assert gaps[0] >= 0.2 and gaps[1] >= 0.3
        assert said == [
            f"flaky exited with code 3; restarting it in {delay:g} s (see {flaky.log_path})"
            for delay in (0.1, 0.2, 0.3)
        ]
        log = flaky.log_path.read_text()
        assert log.count("run\n") == 4 and log.count("restarted by the supervisor after exit code 3") == 3
        assert steady.popen.poll() is None and steady.restarts == []  # a running child is left alone
    finally:
        supervisor.stop_all()


def test_a_restart_kills_what_the_exited_child_left_behind(tmp_path: Path) -> None:
    """The child's process group goes before it starts again: a grandchild holding its port must not
    outlive it (the restarted child would find the port taken)."""
    supervisor = Supervisor(tmp_path, {}, first_backoff_s=0.05, notify=lambda _: None)
    # forks a grandchild in its group, prints its pid, exits
    script = "import subprocess; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True)"
    child = supervisor.start("forker", [sys.executable, "-c", script])
    try:
        _watch_until(supervisor, lambda _: len(child.restarts) == 1)
        grandchild = int(child.log_path.read_text().split()[0])
        deadline = time.monotonic() + 5
        while _alive(grandchild):
            assert time.monotonic() < deadline, "the exited child's grandchild survived its restart"
            time.sleep(0.05)
    finally:
        supervisor.stop_all()
