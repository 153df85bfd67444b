"""mqctl's message commands through the SDK and a real broker, and the whole path as subprocesses."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.broker.conftest import REPO_ROOT
from tests.integration.cli.conftest import Mqctl, Stack, run_mqctl

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_send_send_file_and_consume(stack: Stack, operator: Mqctl, tenant: str, tmp_path: Path) -> None:
    operator.ok("key", "create", "--save")
    operator.ok("topic", "create", "events", "--queues", "2")
    operator.ok("group", "create", "readers")

    receipt = operator.json(
        "message", "send", "events", "hello", "--tag", "greeting", "-k", "k1", "-p", "region=eu"
    )
    assert set(receipt) == {"endpoint", "message_id", "offset", "queue_id", "topic"}
    assert receipt["endpoint"] == stack.broker  # found in the registry (operators may read it)
    piped = operator("message", "send", "events", "-o", "json", input="from stdin")
    assert piped.exit_code == 0, piped.output

    lines = tmp_path / "batch.txt"
    lines.write_text("one\ntwo\n\nthree\n")
    sent = operator.json("message", "send-file", "events", str(lines), "--tag", "batch")
    assert sent["sent"] == 3 and len(set(sent["message_ids"])) == 3

    got = operator(
        "message", "consume", "events", "-g", "readers", "--max", "5", "--idle-timeout", "10", "-o", "json"
    )
    assert got.exit_code == 0, got.output
    records = [json.loads(line) for line in got.stdout.splitlines()]
    bodies = sorted(r["body"] for r in records)
    assert bodies == ["from stdin", "hello", "one", "three", "two"]
    hello = next(r for r in records if r["body"] == "hello")
    assert hello["tag"] == "greeting" and hello["keys"] == ["k1"] and hello["properties"] == {"region": "eu"}
    assert hello["message_id"] == receipt["message_id"]
    assert "5 message(s) received" in got.stderr

    # everything was acknowledged: nothing comes back
    again = operator("message", "tail", "events", "-g", "readers", "--idle-timeout", "2", "-o", "json")
    assert again.exit_code == 0 and again.stdout == ""

    # errors: a missing topic is "not found" (3); a bad property is a usage error (2)
    missing = operator("message", "send", "no-such-topic", "x")
    assert missing.exit_code == 3, missing.output
    assert operator("message", "send", "events", "x", "-p", "novalue").exit_code == 2
    assert operator("message", "consume", "events", "-g", "readers", "--endpoint", "nonsense").exit_code == 2


def test_explicit_endpoint_and_credentials(stack: Stack, operator: Mqctl, tenant: str) -> None:
    key = operator.json("key", "create")  # not saved: passed by flags / environment below
    operator.ok("topic", "create", "direct")
    env = {
        "MQCTL_ENDPOINT": stack.broker,
        "MQCTL_ACCESS_KEY": key["access_key"],
        "MQCTL_SECRET_KEY": key["secret"],
    }
    result = operator("message", "send", "direct", "hi", "-o", "json", env=env)
    assert result.exit_code == 0, result.output
    assert "no access key" not in result.stderr
    half = operator("message", "send", "direct", "hi", "--access-key", "AK1")
    assert half.exit_code == 2 and "go together" in half.stderr


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


TAIL_ARGS = ("message", "tail", "orders", "--group", "audit", "-o", "json")


def test_full_path_as_subprocesses(stack: Stack, tmp_path: Path) -> None:
    """login -> tenant -> key -> topic -> group -> send -> tail (until Ctrl-C), via the real entry point."""
    config = tmp_path / "xdg" / "mqctl" / "contexts.json"
    ns = f"p{uuid.uuid4().hex[:10]}"

    def ok(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        done = run_mqctl(args, config, input=input)
        assert done.returncode == 0, (
            f"mqctl {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
        return done

    ok("login", "--url", stack.url, "--tenant", ns, "--endpoint", stack.broker, input=stack.token + "\n")
    ok("tenant", "create", ns)
    key = json.loads(ok("key", "create", "--save", "-o", "json").stdout)
    assert key["access_key"] and key["secret"]
    topic = json.loads(
        ok("topic", "create", "orders", "--type", "NORMAL", "--queues", "2", "-o", "json").stdout
    )
    assert topic["status"] == "active"
    ok("group", "create", "audit")

    # tail runs until Ctrl-C and prints messages as they arrive
    tail = subprocess.Popen(
        # -X faulthandler: a SIGABRT (sent below if it hangs) writes every thread's stack to stderr
        [sys.executable, "-X", "faulthandler", "-m", "cli.main", *TAIL_ARGS],
        cwd=REPO_ROOT,
        env={"MQCTL_CONFIG": str(config), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a run started in the background by a non-interactive shell (`make test &`) inherits
        # SIGINT ignored, and Python keeps it so: give the child the disposition a terminal has
        preexec_fn=_default_sigint,
    )
    seen: list[dict[str, object]] = []
    errors: list[str] = []  # stderr is drained as it comes: a full pipe would block the process
    readers = [
        threading.Thread(
            target=lambda: seen.extend(json.loads(line) for line in tail.stdout or []), daemon=True
        ),
        threading.Thread(target=lambda: errors.extend(tail.stderr or []), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        for i in range(3):
            ok("message", "send", "orders", f"order-{i}", "--key", f"o{i}")
        deadline = time.monotonic() + 60
        while len(seen) < 3 and time.monotonic() < deadline:
            assert tail.poll() is None, "".join(errors)
            time.sleep(0.2)
        assert sorted(str(m["body"]) for m in seen) == ["order-0", "order-1", "order-2"]
        # Ctrl-C: the normal way to stop a tail, so exit 0
        tail.send_signal(signal.SIGINT)
        try:
            code = tail.wait(30)
        except subprocess.TimeoutExpired:
            tail.send_signal(signal.SIGABRT)
            tail.wait(10)
            readers[1].join(5)
            raise AssertionError(
                "tail still running 30 s after Ctrl-C:\n" + "".join(errors)[-8000:]
            ) from None
        for reader in readers:
            reader.join(5)
        assert code == 0, "".join(errors)
        assert "3 message(s) received" in "".join(errors)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait(10)


def test_delay_and_fifo_messages(stack: Stack, operator: Mqctl, tenant: str) -> None:
    operator.ok("key", "create", "--save")
    operator.ok("topic", "create", "later", "--type", "DELAY", "--queues", "1")
    operator.ok("topic", "create", "steps", "--type", "FIFO", "--queues", "4")
    operator.ok("group", "create", "waiters")
    operator.ok("group", "create", "ordered", "--fifo")

    sent_at = time.time()
    operator.ok("message", "send", "later", "wake up", "--delay", "2")
    cancelled = operator.json("message", "send", "later", "never", "--delay", "2")
    recalled = operator.json("message", "recall", "later", cancelled["recall_handle"])
    assert recalled == {"message_id": cancelled["message_id"], "topic": "later", "recalled": True}
    got = operator.ok(
        "message", "consume", "later", "-g", "waiters", "--max", "2", "--idle-timeout", "6", "-o", "json"
    )
    [record] = [json.loads(line) for line in got.stdout.splitlines()]  # the recalled one never comes
    assert record["body"] == "wake up" and record["delivery_time"] is not None
    assert time.time() - sent_at >= 1.5  # not delivered before its time
    # past its delivery time there is nothing left to recall: not found (exit 3), in one line
    late = operator("message", "recall", "later", cancelled["recall_handle"])
    assert late.exit_code == 3, late.output

    queues = {
        operator.json("message", "send", "steps", f"step-{i}", "--message-group", "order-7")["queue_id"]
        for i in range(3)
    }
    assert len(queues) == 1  # one message group, one queue
    got = operator.ok(
        "message", "consume", "steps", "-g", "ordered", "--max", "3", "--idle-timeout", "10", "-o", "json"
    )
    assert [json.loads(line)["body"] for line in got.stdout.splitlines()] == ["step-0", "step-1", "step-2"]
    assert (
        operator(
            "message", "send", "later", "x", "--delay", "1", "--deliver-at", "2030-01-01T00:00:00Z"
        ).exit_code
        == 2
    )
