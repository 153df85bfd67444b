"""``mqctl message send``/``consume`` with tenant A's access key cannot reach tenant B's topics.

A broker as in production (no development mode, signed requests only) with two tenants, and mqctl
as a real subprocess pointed at it with ``--endpoint``/``--access-key``/``--secret-key``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqcloud.admin_client import BrokerAdminClient
from tests.integration.broker.conftest import BrokerProcess, messages
from tests.integration.cli.conftest import run_mqctl
from tests.integration.security.conftest import ADMIN_TOKEN, client, secure_broker_process, tenant

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = secure_broker_process(tmp_path / "broker")
    process.start()
    yield process
    process.kill()


def send(
    broker: BrokerProcess, config: Path, tenant_ns: str, topic: str, key: tuple[str, str]
) -> tuple[int, str]:
    """``mqctl message send TOPIC payload`` as ``tenant_ns`` with ``key``; (exit code, output)."""
    args = ["message", "send", topic, "payload", "--tenant", tenant_ns, "--endpoint", broker.target]
    args += ["--access-key", key[0], "--secret-key", key[1], "-o", "json"]
    done = run_mqctl(args, config)
    return done.returncode, done.stdout + done.stderr


def test_tenant_a_key_cannot_send_to_tenant_b(broker: BrokerProcess, tmp_path: Path) -> None:
    # given: tenants acme and globex, each with a topic "orders", a group and a key
    with BrokerAdminClient(broker.target, token=ADMIN_TOKEN) as op:
        acme = tenant(op, "acme")
        globex = tenant(op, "globex")
    config = tmp_path / "mqctl.json"
    # acme's key works for acme (the setup is sound)
    code, out = send(broker, config, "acme", "orders", acme)
    assert code == 0, out
    assert json.loads(out[out.index("{") :])["message_id"]

    # when: acme's key is used for globex's topic, by namespace and by a qualified name
    by_namespace = send(broker, config, "globex", "orders", acme)
    by_name = send(broker, config, "acme", "globex%orders", acme)
    # and with a wrong secret for the right tenant
    wrong_secret = send(broker, config, "globex", "orders", (globex[0], "not-the-secret"))

    # then: refused, non-zero, with a message saying why (no traceback)
    code, out = by_namespace
    assert code == 4, out  # PERMISSION: the broker answered FORBIDDEN
    assert "40300" in out and "access key 'AKacme' belongs to namespace 'acme', not 'globex'" in out, out
    assert "Traceback" not in out
    code, out = by_name
    assert code == 2, out  # USAGE: a qualified name is not a topic name (ILLEGAL_TOPIC)
    assert "40002" in out and "illegal topic name 'globex%orders'" in out, out
    code, out = wrong_secret
    assert code == 5, out  # UNAUTHENTICATED
    assert "40100" in out and "signature mismatch for access key 'AKglobex'" in out, out
    # and nothing reached globex's topic
    v2 = client(broker, "globex", globex)
    try:
        assert messages(v2.receive("billing", "orders", batch=16, poll_s=1)) == []
    finally:
        v2.close()


def test_tenant_a_key_cannot_consume_from_tenant_b(broker: BrokerProcess, tmp_path: Path) -> None:
    # given: a message waiting in globex's topic
    with BrokerAdminClient(broker.target, token=ADMIN_TOKEN) as op:
        acme = tenant(op, "acme")
        globex = tenant(op, "globex")
    config = tmp_path / "mqctl.json"
    code, out = send(broker, config, "globex", "orders", globex)
    assert code == 0, out
    # when: acme's key consumes it through globex's namespace
    args = ["message", "consume", "orders", "--group", "billing", "--tenant", "globex", "--max", "1"]
    args += [
        "--idle-timeout",
        "3",
        "--endpoint",
        broker.target,
        "--access-key",
        acme[0],
        "--secret-key",
        acme[1],
    ]
    done = run_mqctl(args, config)
    # then: refused with the broker's reason, and the message is still there for globex
    out = done.stdout + done.stderr
    assert done.returncode == 4, out
    assert "access key 'AKacme' belongs to namespace 'acme', not 'globex'" in out, out
    assert "payload" not in done.stdout
    v2 = client(broker, "globex", globex)
    try:
        assert [m.body for m in messages(v2.receive("billing", "orders", batch=16, poll_s=2))] == [b"payload"]
    finally:
        v2.close()
