"""``mqctl standalone --controller``: the stack runs an HA controller too and the broker becomes the
master of a one-node group; Ctrl-C (SIGTERM) stops everything, the controller included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqcloud import ClientConfig, Credentials, Message, Producer
from mqcloud.admin_cluster import ClusterAdminClient
from mqcloud.errors import MQClientError
from tests.conftest import free_port
from tests.integration.standalone.test_standalone import REPO, processes_with_data_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_standalone_with_a_controller(tmp_path: Path) -> None:
    data_dir = (tmp_path / "data").resolve()
    controller = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["MQ_BROKER_COMMIT_LOG_SEGMENT_BYTES"] = str(16 << 20)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "standalone",
            "--data-dir",
            str(data_dir),
            "--http",
            f"127.0.0.1:{free_port()}",
            "--broker",
            f"127.0.0.1:{free_port()}",
            "--metrics",
            "",
            "--controller",
            controller,
            "--ha-listen",
            f"127.0.0.1:{free_port()}",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not (data_dir / "demo.json").exists():  # written once the stack is up
            assert time.monotonic() < deadline and proc.poll() is None, "demo.json never appeared"
            time.sleep(0.25)
        demo = json.loads((data_dir / "demo.json").read_text())
        endpoint = demo["broker"]["endpoint"]
        # the broker is the writable master (epoch 1) of a group the controller knows
        with ClusterAdminClient(endpoint, token=demo["broker"]["admin_token"]) as admin:
            status = admin.status()
        node = status["node"]
        assert node["role"] == "MASTER" and node["writable"], status
        assert node["controller"] == controller
        assert int(node["epoch"]) == 1
        assert [n["role"] for n in status["group_nodes"]] == ["MASTER"]
        assert (data_dir / "controller.db").exists()
        # and it takes the demo tenant's messages once Celery provisioned the topic and the key
        tenant = demo["tenant"]
        config = ClientConfig(
            endpoint,
            credentials=Credentials(tenant["access_key"], tenant["secret_key"]),
            namespace=tenant["namespace"],
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with Producer(config, topics=[tenant["topic"]]) as producer:
                    receipt = producer.send(Message(tenant["topic"], b"through the HA broker"))
                break
            except MQClientError:  # the topic or the key is still on its way to the broker
                assert time.monotonic() < deadline, "the demo topic or key never reached the broker"
                time.sleep(0.5)
        assert receipt.message_id
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        finally:
            out = proc.stdout.read().decode() if proc.stdout else ""
    # Ctrl-C leaves nothing behind, the controller included
    assert proc.returncode == 0, out
    deadline = time.monotonic() + 15
    while processes_with_data_dir(data_dir):
        assert time.monotonic() < deadline, "a child outlived the supervisor"
        time.sleep(0.25)
