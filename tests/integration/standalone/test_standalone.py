"""``mqctl standalone`` starts the whole stack and stops it without leaving a process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mqcloud import ClientConfig, Credentials, Message, Producer
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.errors import MQClientError, UnauthorizedError
from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def processes_with_data_dir(data_dir: Path) -> list[int]:
    """PIDs whose environment names ``data_dir``: every child standalone starts carries it."""
    needle = f"MQ_DATA_DIR={data_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def broker_pid(data_dir: Path) -> int:
    """The PID of the broker standalone runs on ``data_dir``."""
    for pid in processes_with_data_dir(data_dir):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if b"broker" in argv and b"start" in argv:
            return pid
    raise AssertionError("no broker process")


def test_children_die_with_a_killed_supervisor(tmp_path: Path) -> None:
    # given: standalone with its children up
    data_dir = tmp_path / "data"
    http_port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["MQ_BROKER_COMMIT_LOG_SEGMENT_BYTES"] = str(16 << 20)  # not 1 GiB zero-filled per test
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "standalone",
            "--data-dir",
            str(data_dir),
            "--http",
            f"127.0.0.1:{http_port}",
            "--broker",
            f"127.0.0.1:{free_port()}",
            "--metrics",
            "",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while len(processes_with_data_dir(data_dir.resolve())) < 4:
            assert time.monotonic() < deadline and proc.poll() is None, "stack never started"
            time.sleep(0.5)
        # when: the supervisor is killed outright, with no chance to clean up
        proc.kill()
        proc.wait()
        # then: its children follow it
        deadline = time.monotonic() + 15
        while processes_with_data_dir(data_dir.resolve()):
            assert time.monotonic() < deadline, "children outlived a SIGKILLed supervisor"
            time.sleep(0.25)
    finally:
        for pid in processes_with_data_dir(data_dir.resolve()):
            os.kill(pid, signal.SIGKILL)


def test_standalone_serves_and_stops_cleanly(tmp_path: Path) -> None:
    # given: embedded defaults (no DATABASE_URL), free ports
    data_dir = tmp_path / "data"
    http_port, broker_port, metrics_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["MQ_BROKER_COMMIT_LOG_SEGMENT_BYTES"] = str(16 << 20)  # not 1 GiB zero-filled per test
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "standalone",
            "--data-dir",
            str(data_dir),
            "--http",
            f"127.0.0.1:{http_port}",
            "--broker",
            f"127.0.0.1:{broker_port}",
            "--metrics",
            f"127.0.0.1:{metrics_port}",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        # when: the stack comes up
        base = f"http://127.0.0.1:{http_port}"
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                if httpx.get(f"{base}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "control plane never became healthy"
            time.sleep(0.5)

        # then: health, schema, console and demo credentials work
        assert httpx.get(f"{base}/api/v1/health").json()["status"] == "ok"
        assert httpx.get(f"{base}/api/schema/").status_code == 200
        while not (data_dir / "demo.json").exists():  # written once the stack is up
            assert time.monotonic() < deadline and proc.poll() is None, "demo.json never appeared"
            time.sleep(0.25)
        demo = json.loads((data_dir / "demo.json").read_text())
        assert demo["tenant"]["namespace"] == "demo"
        with httpx.Client(base_url=base) as client:
            login = client.get("/accounts/login/")
            csrf = client.cookies["csrftoken"]
            assert login.status_code == 200
            page = client.post(
                "/accounts/login/",
                data={
                    "username": demo["console"]["username"],
                    "password": demo["console"]["password"],
                    "csrfmiddlewaretoken": csrf,
                    "next": "/",
                },
                follow_redirects=True,
            )
            assert page.status_code == 200
            # a member of one tenant lands on that tenant's overview
            assert page.url.path == "/t/demo/"
            assert "<title>Overview · demo" in page.text and "<code>demo</code>" in page.text
        token_auth = {"Authorization": f"Token {demo['api']['token']}"}
        assert httpx.get(f"{base}/api/v1/", headers=token_auth).status_code == 200
        # the broker runs and answers its admin API at the endpoint demo.json names
        assert demo["broker"]["endpoint"] == f"127.0.0.1:{broker_port}"
        # and Celery provisioned the demo tenant's topic onto it from the control plane
        with BrokerAdminClient(
            demo["broker"]["endpoint"], timeout=5, token=demo["broker"]["admin_token"]
        ) as admin:
            wanted = f"demo%{demo['tenant']['topic']}"
            deadline = time.monotonic() + 45
            while wanted not in {t.name for t in admin.list_topics()}:
                assert time.monotonic() < deadline, "the demo topic never reached the broker"
                time.sleep(0.5)
        # the demo SDK example signs with the demo key (provisioned by Celery) and an unsigned
        # client is refused: standalone does not run the broker in development mode
        tenant = demo["tenant"]
        signed = ClientConfig(
            demo["broker"]["endpoint"],
            credentials=Credentials(tenant["access_key"], tenant["secret_key"]),
            namespace=tenant["namespace"],
        )
        while True:
            try:
                with Producer(signed, topics=[tenant["topic"]]) as producer:
                    producer.send(Message(tenant["topic"], b"standalone-demo"))
                break
            except UnauthorizedError:  # the key is still on its way to the broker
                assert time.monotonic() < deadline, "the demo key never reached the broker"
                time.sleep(0.5)
        unsigned = ClientConfig(demo["broker"]["endpoint"], namespace=tenant["namespace"])
        with pytest.raises(UnauthorizedError), Producer(unsigned, topics=[tenant["topic"]]) as producer:
            producer.send(Message(tenant["topic"], b"anonymous"))
        # the node is registered with its metrics endpoint, so the overview shows storage vs quota
        nodes = httpx.get(f"{base}/api/v1/broker-nodes/", headers=token_auth).json()
        nodes = nodes.get("results", nodes) if isinstance(nodes, dict) else nodes
        assert [n["metrics_endpoint"] for n in nodes] == [f"127.0.0.1:{metrics_port}"]
        scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
        assert 'mq_tenant_storage_bytes{tenant="demo"}' in scraped
        children = processes_with_data_dir(data_dir.resolve())
        assert len(children) >= 3  # control plane, celery and the broker

        # when: the broker dies (SIGKILL); then: standalone starts it again on its data, and it serves
        killed = broker_pid(data_dir.resolve())
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "standalone stopped when the broker died"
            try:
                with Producer(signed, topics=[tenant["topic"]]) as producer:
                    producer.send(Message(tenant["topic"], b"after-a-restart"))
                break
            except MQClientError:
                assert time.monotonic() < deadline, "the broker was not started again"
                time.sleep(0.5)
        assert broker_pid(data_dir.resolve()) != killed

        # when: SIGTERM
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        # then: exits within 15 s, cleanly, with nothing left behind
        assert time.monotonic() - started < 15
        assert proc.returncode == 0
        assert proc.stdout is not None
        said = proc.stdout.read().decode()
        assert "broker exited with code -9; restarting it in 1 s" in said, said
        # the banner names the broker's admin token, which mqctl admin needs outside development mode
        assert f"admin token {demo['broker']['admin_token']}" in said, said
        time.sleep(0.5)
        assert processes_with_data_dir(data_dir.resolve()) == []
        # the broker metered the demo tenant into .data/metering (flushed at shutdown)
        records = [
            json.loads(line)
            for path in (data_dir / "metering" / "usage").glob("date=*/hour=*/*.jsonl")
            for line in path.read_text().splitlines()
        ]
        assert any(r["kind"] == "usage" and r["tenant"] == "demo" and r["messages_in"] >= 1 for r in records)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in processes_with_data_dir(data_dir.resolve()):  # never leak a stack on failure
            os.kill(pid, signal.SIGKILL)
        if proc.stdout:
            proc.stdout.close()
