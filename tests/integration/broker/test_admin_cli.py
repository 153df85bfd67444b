"""``mqctl admin`` against a real broker: topics, keys (secrets never printed), ACLs, quotas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from mqcloud.admin_client import BrokerAdminClient, quota_limits
from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess

pytestmark = pytest.mark.integration


def _run(broker: BrokerProcess, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["admin", "--broker", broker.target, "--json", *args])
    return result.exit_code, result.stdout, result.stderr


def test_topics_keys_acls_quotas_round_trip(broker: BrokerProcess, admin: BrokerAdminClient) -> None:
    code, out, _ = _run(broker, "topic", "create", "orders", "--namespace", "acme", "--queues", "2")
    assert code == 0, out
    assert {t.name for t in admin.list_topics("acme")} == {"acme%orders"}

    code, out, _ = _run(broker, "key", "put", "AKCLI1", "--namespace", "acme", "--secret", "s3cret-value")
    assert code == 0, out
    assert "s3cret-value" not in out
    code, out, _ = _run(broker, "key", "put", "AKCLI2", "--namespace", "acme")
    assert code == 0
    generated = out.strip().splitlines()[-1]  # printed once so the operator can hand it over
    assert len(generated) >= 30
    code, out, _ = _run(broker, "key", "list", "--namespace", "acme")
    rows = json.loads(out)
    assert {r["access_key"] for r in rows} == {"AKCLI1", "AKCLI2"}
    assert "secret_key" not in out and "s3cret-value" not in out and generated not in out

    code, out, _ = _run(
        broker, "acl", "put", "p1", "--namespace", "acme", "--resource-type", "Topic",
        "--action", "Pub", "--action", "Sub", "--resource", "ord", "--prefixed", "--deny",
        "--cidr", "10.0.0.0/8",
    )  # fmt: skip
    assert code == 0, out
    (policy,) = admin.list_acls("acme")
    assert (
        policy.name == "p1"
        and policy.resource_pattern == "ord"
        and list(policy.source_cidrs) == ["10.0.0.0/8"]
    )
    code, out, _ = _run(broker, "acl", "delete", "p1", "--namespace", "acme")
    assert code == 0 and admin.list_acls("acme") == []

    code, out, _ = _run(
        broker, "quota", "put", "--namespace", "acme", "produce_messages_per_s=100", "max_topics=5"
    )
    assert code == 0, out
    (quota,) = admin.list_quotas("acme")
    assert quota_limits(quota) == {"produce_messages_per_s": 100, "max_topics": 5}
    code, out, _ = _run(broker, "quota", "list", "--namespace", "acme")
    assert json.loads(out)[0]["produce_messages_per_s"] == 100
    code, out, _ = _run(broker, "quota", "delete", "--namespace", "acme")
    assert code == 0 and admin.list_quotas("acme") == []

    code, out, _ = _run(broker, "key", "delete", "AKCLI1", "--namespace", "acme")
    assert code == 0 and {k.access_key for k in admin.list_access_keys("acme")} == {"AKCLI2"}


def test_bad_input_is_a_one_line_error(broker: BrokerProcess) -> None:
    code, out, err = _run(broker, "quota", "put", "--namespace", "acme", "speed=fast")
    assert code == 2 and "LIMIT=N" in out + err and "Traceback" not in out + err
    code, out, err = _run(broker, "acl", "delete", "missing", "--namespace", "acme")
    assert code != 0 and "Traceback" not in out + err
    assert len((out + err).strip().splitlines()) == 1


def test_a_refusal_exits_with_the_code_of_its_meaning(broker: BrokerProcess) -> None:
    # the exit codes of docs/cli.md, as for the control plane's commands: scripts branch on them
    code, out, err = _run(broker, "topic", "delete", "missing")
    assert code == 3 and "NOT_FOUND" in err, out + err
    assert _run(broker, "topic", "create", "twice")[0] == 0
    code, out, err = _run(broker, "topic", "create", "twice")
    assert code == 6 and "ALREADY_EXISTS" in err, out + err
    code, out, err = _run(broker, "topic", "create", "bad/name")
    assert code == 2 and "INVALID_ARGUMENT" in err, out + err
    code, out, err = _run(broker, "topic", "create", "orders", "--queues", "0")
    assert code == 2, out + err
    unreachable = CliRunner().invoke(app, ["admin", "--broker", f"127.0.0.1:{free_port()}", "topic", "list"])
    assert unreachable.exit_code == 7, unreachable.stdout + unreachable.stderr


def test_a_call_without_the_token_says_where_to_get_it(tmp_path: Path) -> None:
    # given: a broker as in production, its admin API behind a token
    broker = BrokerProcess(
        tmp_path / "broker", free_port(), dev=False, env={"MQ_BROKER_ADMIN_TOKEN": "t0k-1"}
    )
    broker.start()
    try:
        runner = CliRunner()
        argv = ["admin", "--broker", broker.target, "--json", "topic", "list"]
        # when: no token is given (none in the environment either)
        refused = runner.invoke(app, argv, env={"MQ_BROKER_ADMIN_TOKEN": None})
        # then: one line saying what was refused and how to pass the token, exit code 5
        assert refused.exit_code == 5
        said = (refused.stdout + refused.stderr).strip()
        assert "UNAUTHENTICATED" in said and "pass --token or set MQ_BROKER_ADMIN_TOKEN" in said, said
        assert len(said.splitlines()) == 1
        # a wrong token is refused without the hint (the operator gave one); the right one works
        wrong = runner.invoke(
            app, [argv[0], "--token", "nope", *argv[1:]], env={"MQ_BROKER_ADMIN_TOKEN": None}
        )
        assert wrong.exit_code == 5 and "invalid operator credentials" in wrong.stderr
        assert "pass --token" not in wrong.stderr
        allowed = runner.invoke(
            app, [argv[0], "--token", "t0k-1", *argv[1:]], env={"MQ_BROKER_ADMIN_TOKEN": None}
        )
        assert allowed.exit_code == 0, allowed.stdout + allowed.stderr
        assert json.loads(allowed.stdout) == []
    finally:
        broker.stop()
