"""cluster_local's ports: one run never hands out the same port twice (a node's ports are drawn
long before the node binds them, so a repeat would fail one node with "Address already in use")."""

from __future__ import annotations

import importlib.util
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


@pytest.fixture
def cluster_local() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("cluster_local_under_test", SCRIPTS / "cluster_local.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_run_never_hands_out_a_port_twice(
    cluster_local: ModuleType, monkeypatch: pytest.MonkeyPatch, unused_port: int
) -> None:
    # given: a range of ten ports, of which those nothing has bound are free
    low = unused_port - unused_port % 10
    free = [port for port in range(low, low + 10) if _bindable(port)]
    monkeypatch.setenv("MQCLOUD_PORT_RANGE", f"{low}-{low + 9}")
    # when: a cluster draws as many ports, binding none of them
    ports = [cluster_local.free_port() for _ in free]
    # then: each free port once, and one more draw is refused rather than repeated
    assert sorted(ports) == free
    with pytest.raises(RuntimeError, match="no free port"):
        cluster_local.free_port()
