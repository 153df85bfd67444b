"""Start child processes, watch them, and stop every one of them — by PID, process group first.

Used by ``mqctl standalone``: each child runs in its own session so a signal to its process group
also reaches anything it forked (Celery's pool, uvicorn's workers), and nothing outlives the parent.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ("Child", "Supervisor")

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Child:
    """One supervised process and the log file its output goes to."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path


class Supervisor:
    """Owns a set of child processes; ``stop_all`` leaves none running."""

    def __init__(self, log_dir: Path, env: Mapping[str, str]) -> None:
        self.log_dir = log_dir
        self.env = dict(env)
        self.children: list[Child] = []
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, argv: Sequence[str], cwd: Path | None = None) -> Child:
        log_path = self.log_dir / f"{name}.log"
        # The child keeps its own descriptor; ours can close as soon as it has started.
        with open(log_path, "ab") as log_file:
            popen = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        child = Child(name=name, popen=popen, log_path=log_path)
        self.children.append(child)
        return child

    def run_once(
        self, name: str, argv: Sequence[str], timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run a setup step to completion (migrate, bootstrap); raise with its output on failure.

        Like the children, a step dies with the supervisor: bootstrap keeps retrying the control
        plane's HTTP API, which a supervisor SIGKILLed during it no longer serves."""
        return subprocess.run(
            list(argv),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
            preexec_fn=_die_with_parent,
        )

    def first_exited(self) -> Child | None:
        return next((c for c in self.children if c.popen.poll() is not None), None)

    def stop_all(self, timeout: float = 10.0) -> None:
        """SIGTERM every child's process group, wait up to ``timeout``, then SIGKILL what is left."""
        for child in reversed(self.children):
            _signal_group(child.popen, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                child.popen.wait(remaining)
            except subprocess.TimeoutExpired:
                logger.warning("%s did not stop in time; killing it", child.name)
        for child in self.children:
            # The group may hold grandchildren even after the leader exited.
            _signal_group(child.popen, signal.SIGKILL)
            if child.popen.poll() is None:
                child.popen.wait(5)
        self.children.clear()


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM this child when the supervisor dies, even by SIGKILL."""
    if sys.platform == "linux":
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _signal_group(popen: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(popen.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
