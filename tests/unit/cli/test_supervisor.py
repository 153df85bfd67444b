"""cli.supervisor: nothing it starts outlives it, setup steps included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
