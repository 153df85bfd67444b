"""Shared fixtures for every tier."""

from __future__ import annotations

import dataclasses
import os
import random
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

__all__ = ("ManualClock", "Race", "free_port", "reader_racing", "worker_port_range")


_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def worker_port_range() -> tuple[int, int]:
    """This pytest worker's slice of the ports below the ephemeral range (inclusive bounds).

    Ports come from below the ephemeral range: a port the kernel hands out for bind(0) is one it
    also gives to outgoing connections, so a process spawned a moment later (or restarted on the same
    port after a kill) could find it taken. Each pytest worker has a slice of its own, and a script
    a test runs that picks ports itself is handed the slice too (``MQCLOUD_PORT_RANGE``), so it
    cannot take a port another worker has just checked and given to a process still starting.
    """
    low, high = 10000, _ephemeral_low() - 1
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    slot = int(worker) if worker.isdigit() else 0
    width = max((high - low) // 8, 100)
    return low + (slot % 8) * width, low + (slot % 8 + 1) * width - 1


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now, from this worker's slice (:func:`worker_port_range`)."""
    low, high = worker_port_range()
    for _ in range(1000):
        port = random.randint(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{high}")


@pytest.fixture
def unused_port() -> int:
    return free_port()


class ManualClock:
    """A clock for code that takes one (``clock=time.monotonic`` and the like): reads ``now``,
    which the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclasses.dataclass
class Race:
    """What the reader of :func:`reader_racing` did: how often it read, and what it raised."""

    readings: int = 0
    errors: list[BaseException] = dataclasses.field(default_factory=list)


@contextmanager
def reader_racing(read: Callable[[], object]) -> Iterator[Race]:
    """Call ``read`` over and over on another thread (as the metrics endpoint's thread reads state the
    event loop changes) while the body runs, with the interpreter switching threads as often as it
    can; the reader stops at its first exception, which lands in ``Race.errors``."""
    race = Race()
    done = threading.Event()

    def loop() -> None:
        try:
            while not done.is_set():
                read()
                race.readings += 1
        except BaseException as exc:  # the test asserts on it
            race.errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    reader = threading.Thread(target=loop)
    reader.start()
    try:
        yield race
    finally:
        done.set()
        reader.join()
        sys.setswitchinterval(interval)


# Under pytest-xdist (``make test`` runs three workers) execnet sets COLUMNS=80 and LINES=24 in each
# worker; a plain run has neither, and tables printed by the CLI (and by the processes tests start)
# would fold differently. Take them back out so both runs see the same environment.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

# Directories whose tests share a session fixture (a running stack, a browser, installed clients, a
# SparkSession) or load the whole machine (soak, failover rounds, rolling upgrade) run on one worker
# each, in order (``--dist loadgroup``); everything else is spread test by test.
_GROUPS = {
    "tests/e2e/": "console-stack",
    "tests/interop/": "official-clients",
    "tests/integration/cli/": "cli-stack",
    "tests/integration/analytics/": "spark",
    "tests/integration/control_plane/test_job_report_e2e.py": "spark",
    "tests/chaos/": "heavy",
    "tests/integration/deploy/": "heavy",
}


# tryfirst: pytest-xdist's worker reads the xdist_group markers in its own hook of this name, and a
# conftest's hooks run after it unless told otherwise; the groups would then be silently ignored.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = str(config.rootpath) + "/"
    for item in items:
        group = _group_of(str(item.path).removeprefix(root))
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


def _group_of(path: str) -> str | None:
    """The group of a test at ``path`` (a node id or a rootdir-relative file path), if any."""
    for prefix, group in _GROUPS.items():
        if path.startswith(prefix):
            return group
    return None


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Stop a parallel run in which the groups above would be silently ignored.

    pytest-xdist's worker appends ``@group`` to each grouped test's id and its scheduler keeps a
    group on one worker by that suffix alone; a pytest or xdist release that breaks the rename
    (pytest 9.2 with xdist 3.8 did) spreads a group's tests, and its session fixture, over the
    workers. Called in the controller with each worker's collected ids.
    """
    if node.config.getoption("dist") != "loadgroup":
        return
    lost = [nodeid for nodeid in ids if "@" not in nodeid and _group_of(nodeid)]
    if lost:
        pytest.exit(f"pytest-xdist did not group {len(lost)} tests, e.g. {lost[0]}", returncode=4)
