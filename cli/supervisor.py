"""Start child processes, restart those that exit, and stop every one of them — by PID, process
group first.

Used by ``mqctl standalone``: each child runs in its own session so a signal to its process group
also reaches anything it forked (Celery's pool, uvicorn's workers), and nothing outlives the parent.
A child that exits is started again (:meth:`Supervisor.watch`) after a backoff that doubles with each
recent restart, as supervisord or systemd's ``Restart=on-failure`` would; one that keeps exiting
(``max_restarts`` within ``restart_window_s``) is given up on, and the caller stops the rest.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ("Child", "Supervisor")

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Child:
    """One supervised process, the log file its output goes to, and how to start it again."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    argv: list[str]
    cwd: Path | None
    env: dict[str, str]
    restarts: list[float] = field(default_factory=list)  # monotonic times of its recent restarts
    restart_at: float | None = None  # it exited: started again at this monotonic time


class Supervisor:
    """Owns a set of child processes; ``watch`` restarts those that exit, ``stop_all`` leaves none
    running."""

    def __init__(
        self,
        log_dir: Path,
        env: Mapping[str, str],
        *,
        max_restarts: int = 5,
        restart_window_s: float = 60.0,
        first_backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.env = dict(env)
        self.children: list[Child] = []
        self.max_restarts = max_restarts
        self.restart_window_s = restart_window_s
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.notify = notify if notify is not None else logger.warning
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, argv: Sequence[str], cwd: Path | None = None) -> Child:
        log_path = self.log_dir / f"{name}.log"
        env = dict(self.env)  # restarts use the environment the child first had
        child = Child(name, _spawn(list(argv), cwd, env, log_path), log_path, list(argv), cwd, env)
        self.children.append(child)
        return child

    def watch(self) -> Child | None:
        """Restart what exited, each after its backoff; call it every so often. Returns a child that
        exited ``max_restarts`` times within ``restart_window_s`` (given up on: the caller stops the
        rest), else None."""
        now = time.monotonic()
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    self._restart(child)
                continue
            code = child.popen.poll()
            if code is None:
                continue
            _signal_group(child.popen, signal.SIGKILL)  # what it forked must not hold its ports
            child.restarts = [t for t in child.restarts if now - t < self.restart_window_s]
            if len(child.restarts) >= self.max_restarts:
                return child
            delay = min(self.first_backoff_s * 2 ** len(child.restarts), self.max_backoff_s)
            child.restart_at = now + delay
            self.notify(
                f"{child.name} exited with code {code}; restarting it in {delay:g} s (see {child.log_path})"
            )
        return None

    def _restart(self, child: Child) -> None:
        code = child.popen.returncode
        with open(child.log_path, "ab") as log:
            log.write(f"--- restarted by the supervisor after exit code {code} ---\n".encode())
        child.popen = _spawn(child.argv, child.cwd, child.env, child.log_path)
        child.restarts.append(time.monotonic())
        child.restart_at = None

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


def _spawn(argv: list[str], cwd: Path | None, env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    # The child keeps its own descriptor; ours can close as soon as it has started.
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


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
