"""Real controller and broker processes forming HA broker groups on loopback (integration + chaos)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from mqcloud.admin.v1 import cluster_pb2 as cl
from mqcloud.admin.v1 import cluster_pb2_grpc
from tests.conftest import free_port
from tests.integration.broker.conftest import REPO_ROOT, TEST_SEGMENT_BYTES

__all__ = ("HA_SECRET", "ControllerProcess", "HABroker", "HACluster")

# Every node of a test group shares this replication secret (a test may override it per node).
HA_SECRET = "test-replication-secret"


class _Process:
    ready_text = ""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def _spawn(self, args: list[str], env: dict[str, str], timeout: float) -> None:
        self.output = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", *args],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "COLUMNS": "200", **env},
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                if self.ready_text in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{args[0]} did not start:\n" + "".join(self.output))

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


class ControllerProcess(_Process):
    ready_text = "controller listening on"

    def __init__(self, db: str, port: int) -> None:
        super().__init__()
        self.db = db
        self.port = port

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        self._spawn(["controller", "start", "--listen", self.target, "--db", self.db], {}, timeout)


class HABroker(_Process):
    ready_text = "broker listening on"

    def __init__(
        self, data_dir: Path, group: str, node: str, controllers: str, env: dict[str, str] | None = None
    ) -> None:
        super().__init__()
        self.data_dir = data_dir
        self.group = group
        self.node = node
        self.controllers = controllers
        self.port = free_port()
        self.ha_port = free_port()
        self.metrics_port = free_port()
        self.env = env or {}

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        env = {
            "MQ_BROKER_GRACE_SECONDS": "2",
            "MQ_BROKER_COMMIT_LOG_SEGMENT_BYTES": str(TEST_SEGMENT_BYTES),
            "MQ_BROKER_BROKER_NAME": self.group,
            "MQ_BROKER_HA_NODE": self.node,
            "MQ_BROKER_HA_LISTEN": f"127.0.0.1:{self.ha_port}",
            "MQ_BROKER_CONTROLLER": self.controllers,
            "MQ_BROKER_HA_SECRET": HA_SECRET,
            **self.env,
        }
        args = ["broker", "start", "--data-dir", str(self.data_dir), "--listen", self.target]
        # Development mode like every broker of a test that is not about security: the status
        # calls below use the admin API without an operator token.
        metrics = f"127.0.0.1:{self.metrics_port}"
        self._spawn([*args, "--metrics-listen", metrics, "--dev"], env, timeout)

    def metrics(self, timeout: float = 2.0) -> str:
        """The Prometheus exposition text of this node."""
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=timeout) as r:
            return str(r.read().decode())

    def status(self, timeout: float = 2.0) -> cl.GetClusterStatusResponse:
        with grpc.insecure_channel(self.target) as channel:
            stub = cluster_pb2_grpc.ClusterAdminStub(channel)
            return stub.GetClusterStatus(cl.GetClusterStatusRequest(), timeout=timeout)


class HACluster:
    """``controllers`` controller processes sharing one SQLite file and one group of ``size`` nodes."""

    def __init__(
        self,
        root: Path,
        size: int = 3,
        controllers: int = 1,
        env: dict[str, str] | None = None,
        db: str | None = None,
    ) -> None:
        self.root = root
        self.db = db or f"sqlite:///{root / 'controller.db'}"
        self.controllers = [ControllerProcess(self.db, free_port()) for _ in range(controllers)]
        addresses = ",".join(c.target for c in self.controllers)
        self.nodes = [HABroker(root / f"n{i}", "group-a", f"n{i}", addresses, env) for i in range(size)]

    def start(self) -> None:
        for controller in self.controllers:
            controller.start()
        for node in self.nodes:
            node.start()

    def close(self) -> None:
        for proc in [*self.nodes, *self.controllers]:
            proc.kill()

    def node(self, name: str) -> HABroker:
        return next(n for n in self.nodes if n.node == name)

    def statuses(self) -> dict[str, Any]:
        out = {}
        for node in self.nodes:
            if not node.running:
                continue
            try:
                out[node.node] = node.status(1.0).node
            except grpc.RpcError:
                continue
        return out

    def wait_master(self, timeout: float = 20.0, exclude: str = "") -> HABroker:
        """The node that is a writable master (not ``exclude``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, st in self.statuses().items():
                if st.role == "MASTER" and st.writable and name != exclude:
                    return self.node(name)
            time.sleep(0.05)
        raise AssertionError(f"no writable master within {timeout}s: {self.statuses()}")

    def wait_caught_up(self, timeout: float = 15.0) -> None:
        """Wait until every running node holds the same CommitLog (the same max offset)."""
        deadline = time.monotonic() + timeout
        while True:
            offsets = {n.node: n.status().node.max_offset for n in self.nodes if n.running}
            if len(set(offsets.values())) <= 1:
                return
            assert time.monotonic() < deadline, f"nodes did not catch up within {timeout}s: {offsets}"
            time.sleep(0.05)

    def wait_in_sync(self, count: int, timeout: float = 30.0) -> HABroker:
        """Wait until the master counts ``count`` nodes (itself included) in its SyncStateSet."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, st in self.statuses().items():
                if st.role == "MASTER" and st.writable:
                    in_sync = sum(1 for r in st.replicas if r.in_sync)
                    if in_sync + 1 >= count:
                        return self.node(name)
            time.sleep(0.1)
        raise AssertionError(f"fewer than {count} in sync within {timeout}s: {self.statuses()}")
