"""mqctl's control-plane commands through CliRunner against a real stack (control plane, Celery, broker)."""

from __future__ import annotations

import json
import stat
import time
import uuid

import pytest
import yaml

from mqcloud.admin_client import BrokerAdminClient
from tests.integration.broker.conftest import BrokerProcess
from tests.integration.cli.conftest import Mqctl, Stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def broker_topics(stack: Stack) -> dict[str, object]:
    with BrokerAdminClient(stack.broker, token=stack.admin_token) as client:
        return {f"{t.namespace}%{t.name}" if "%" not in t.name else t.name: t for t in client.list_topics()}


def broker_groups(stack: Stack) -> dict[str, object]:
    with BrokerAdminClient(stack.broker, token=stack.admin_token) as client:
        return {f"{g.namespace}%{g.name}" if "%" not in g.name else g.name: g for g in client.list_groups()}


#
# login and contexts
#


def test_login_saves_a_0600_context_and_refuses_a_bad_token(stack: Stack, mqctl: Mqctl) -> None:
    # a wrong token: exit 5, nothing saved
    bad = mqctl("login", "--url", stack.url, "--token", "not-a-token")
    assert bad.exit_code == 5, bad.output
    assert "not signed in" in bad.stderr
    assert "Traceback" not in bad.output
    assert not mqctl.config.exists()

    # the token from the prompt
    good = mqctl("login", "--url", stack.url, "--name", "local", input=f"{stack.token}\n")
    assert good.exit_code == 0, good.output
    assert stat.S_IMODE(mqctl.config.stat().st_mode) == 0o600
    assert stat.S_IMODE(mqctl.config.parent.stat().st_mode) == 0o700
    saved = json.loads(mqctl.config.read_text())
    assert saved["current"] == "local"
    assert saved["contexts"]["local"]["token"] == stack.token

    # list never shows the token
    listed = mqctl.json("context", "list")
    assert listed == [
        {
            "credentials": [],
            "current": True,
            "endpoint": None,
            "name": "local",
            "tenant": None,
            "token": "set",
            "url": stack.url,
        }
    ]
    assert stack.token not in mqctl.ok("context", "list").stdout
    assert stack.token not in mqctl.ok("context", "show", "-o", "yaml").stdout


def test_contexts_switch_and_env_overrides(stack: Stack, mqctl: Mqctl) -> None:
    mqctl.ok("login", "--url", stack.url, "--token", stack.token, "--name", "good")
    mqctl.ok("login", "--url", stack.url, "--token", "wrong", "--name", "broken", "--no-verify")
    # the current context is the last login: its token is refused
    assert mqctl("tenant", "list").exit_code == 5
    mqctl.ok("context", "use", "good")
    assert mqctl("tenant", "list").exit_code == 0
    # --context and MQCTL_CONTEXT pick another one for one command
    assert mqctl("--context", "broken", "tenant", "list").exit_code == 5
    assert mqctl("tenant", "list", env={"MQCTL_CONTEXT": "broken"}).exit_code == 5
    # MQCTL_TOKEN overrides the context's token
    assert mqctl("tenant", "list", env={"MQCTL_CONTEXT": "broken", "MQCTL_TOKEN": stack.token}).exit_code == 0
    # an unknown context is "not found"
    missing = mqctl("context", "use", "nope")
    assert missing.exit_code == 3
    assert "good" in missing.stderr
    mqctl.ok("context", "delete", "broken")
    assert [c["name"] for c in mqctl.json("context", "list")] == ["good"]


def test_environment_only_no_context_file(stack: Stack, mqctl: Mqctl) -> None:
    result = mqctl(
        "tenant", "list", "-o", "json", env={"MQCTL_API_URL": stack.url, "MQCTL_TOKEN": stack.token}
    )
    assert result.exit_code == 0, result.output
    assert "demo" in {t["namespace"] for t in json.loads(result.stdout)}
    assert not mqctl.config.exists()
    # and without any configuration: a usage error that says what to do
    bare = mqctl("tenant", "list")
    assert bare.exit_code == 2
    assert "mqctl login" in bare.stderr


def test_unreachable_control_plane_is_exit_7_in_one_line(mqctl: Mqctl) -> None:
    from tests.conftest import free_port

    result = mqctl("--url", f"http://127.0.0.1:{free_port()}", "--token", "x", "tenant", "list")
    assert result.exit_code == 7
    assert result.stderr.startswith("error: cannot reach the control plane")
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""
    debug = mqctl("--url", f"http://127.0.0.1:{free_port()}", "--token", "x", "--debug", "tenant", "list")
    assert debug.exit_code != 0
    assert debug.exception is not None  # --debug lets the exception (and its traceback) through


#
# tenants, keys, topics, groups
#


def test_tenant_create_get_and_output_formats(operator: Mqctl) -> None:
    ns = f"t{uuid.uuid4().hex[:10]}"
    created = operator.json("tenant", "create", ns, "--name", "Formats Inc")
    assert {"id", "namespace", "name", "plan", "cluster", "status", "created", "updated"} <= created.keys()
    assert created["namespace"] == ns and created["status"] == "active"

    as_json = operator.ok("tenant", "get", ns, "-o", "json").stdout
    # stable JSON: sorted keys, two-space indent, the same document every time
    assert as_json == json.dumps(json.loads(as_json), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert operator.ok("tenant", "get", ns, "-o", "json").stdout == as_json
    assert yaml.safe_load(operator.ok("tenant", "get", ns, "-o", "yaml").stdout) == json.loads(as_json)
    table = operator.ok("tenant", "list").stdout
    assert ns in table and "namespace" in table
    # MQCTL_OUTPUT is the default for -o
    assert json.loads(operator("tenant", "get", ns, env={"MQCTL_OUTPUT": "json"}).stdout)["namespace"] == ns
    # data on stdout, messages on stderr
    again = operator("tenant", "create", f"x{uuid.uuid4().hex[:8]}", "-o", "json")
    assert again.exit_code == 0 and "created" in again.stderr and json.loads(again.stdout)

    # exit codes: not found 3, conflict 6, invalid 2
    assert operator("tenant", "get", "no-such-tenant").exit_code == 3
    dup = operator("tenant", "create", ns)
    assert dup.exit_code == 6, dup.output
    bad = operator("tenant", "create", "Not A Slug!")
    assert bad.exit_code == 2, bad.output
    assert bad.stderr.startswith("error: namespace:")

    # update and delete
    renamed = operator.json("tenant", "update", ns, "--name", "Renamed", "--status", "suspended")
    assert (renamed["name"], renamed["status"]) == ("Renamed", "suspended")
    assert operator("tenant", "update", ns).exit_code == 2  # nothing to change
    assert operator("tenant", "update", ns, "--plan", "no-such-plan").exit_code == 3
    operator.ok("tenant", "delete", ns, "--yes")
    assert operator("tenant", "get", ns).exit_code == 3


def test_key_create_prints_access_key_and_secret(stack: Stack, operator: Mqctl, tenant: str) -> None:
    key = operator.json("key", "create", "--tenant", tenant, "--save", "--description", "ci")
    assert key["access_key"].startswith("AK") and len(key["secret"]) >= 20
    assert key["secret_key"] == key["secret"]
    assert key["status"] == "active"  # waited for the brokers
    saved = json.loads(operator.config.read_text())["contexts"]["default"]["credentials"][tenant]
    assert saved == {"access_key": key["access_key"], "secret_key": key["secret"]}
    with BrokerAdminClient(stack.broker, token=stack.admin_token) as client:
        assert key["access_key"] in {k.access_key for k in client.list_access_keys(tenant)}

    listed = operator.json("key", "list")
    assert [k["access_key"] for k in listed] == [key["access_key"]]
    assert "secret" not in listed[0] and "secret_key" not in listed[0]

    rotated = operator.json("key", "rotate", key["access_key"], "--overlap-seconds", "60")
    assert rotated["access_key"] != key["access_key"] and rotated["secret"]
    revoked = operator.json("key", "revoke", key["access_key"])
    assert revoked["key_status"] == "revoked"
    assert operator("key", "get", "AKNOSUCHKEY").exit_code == 3


def test_topic_create_waits_until_the_broker_serves_it(stack: Stack, operator: Mqctl, tenant: str) -> None:
    topic = operator.json("topic", "create", "orders", "--type", "FIFO", "--queues", "4")
    # the JSON schema scripts rely on: the API's fields, unchanged
    assert set(topic) == {
        "id", "tenant", "namespace", "name", "qualified_name", "description", "message_type", "queue_count",
        "retention_hours", "tiered_retention_hours", "max_message_bytes", "cluster", "placements", "status",
        "status_message", "generation", "applied_generation", "created", "updated",
    }  # fmt: skip
    # when mqctl returns, the row is active and the broker has the topic
    assert topic["status"] == "active" and topic["applied_generation"] == topic["generation"]
    served = broker_topics(stack)[f"{tenant}%orders"]
    assert served.queue_count == 4  # type: ignore[attr-defined]

    updated = operator.json("topic", "update", "orders", "--queues", "6")
    assert updated["status"] == "active" and updated["queue_count"] == 6
    assert broker_topics(stack)[f"{tenant}%orders"].queue_count == 6  # type: ignore[attr-defined]

    listed = operator.json("topic", "list")
    assert [(t["name"], t["message_type"]) for t in listed] == [("orders", "FIFO")]
    assert operator.json("topic", "get", "orders")["qualified_name"] == f"{tenant}%orders"

    assert operator("topic", "create", "orders").exit_code == 6  # already exists
    assert operator("topic", "create", "bad", "--queues", "100000").exit_code == 2  # past the maximum
    assert operator("topic", "create", "x", "--type", "WEIRD").exit_code == 2  # click's usage error
    assert operator("topic", "get", "missing").exit_code == 3

    # --no-wait returns the row as the API answered it
    quick = operator.json("topic", "create", "events", "--no-wait")
    assert quick["status"] == "provisioning"

    refused = operator("topic", "delete", "orders")  # no terminal to confirm on
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    operator.ok("topic", "delete", "orders", "--yes")
    assert f"{tenant}%orders" not in broker_topics(stack)
    assert operator("topic", "get", "orders").exit_code == 3


def test_group_create_fifo_waits_until_the_broker_serves_it(
    stack: Stack, operator: Mqctl, tenant: str
) -> None:
    group = operator.json("group", "create", "billing", "--fifo", "--max-delivery-attempts", "5")
    assert {
        "id",
        "namespace",
        "name",
        "fifo",
        "broadcast",
        "max_delivery_attempts",
        "retry_policy",
        "status",
    } <= set(group)
    assert group["status"] == "active" and group["fifo"] is True
    served = broker_groups(stack)[f"{tenant}%billing"]
    assert served.fifo is True and served.max_delivery_attempts == 5  # type: ignore[attr-defined]
    updated = operator.json(
        "group", "update", "billing", "--no-fifo", "--retry-policy", "exponential",
        "--retry-initial-backoff-ms", "250", "--description", "invoices",
    )  # fmt: skip
    assert (updated["fifo"], updated["retry_policy"], updated["retry_initial_backoff_ms"]) == (
        False,
        "EXPONENTIAL",
        250,
    )
    assert updated["description"] == "invoices" and updated["max_delivery_attempts"] == 5  # kept
    assert broker_groups(stack)[f"{tenant}%billing"].fifo is False  # type: ignore[attr-defined]
    assert [g["name"] for g in operator.json("group", "list")] == ["billing"]
    operator.ok("group", "delete", "billing", "-y")
    assert f"{tenant}%billing" not in broker_groups(stack)


def test_wait_times_out_with_exit_8_while_the_broker_is_away(
    stack: Stack, operator: Mqctl, tenant: str
) -> None:
    # a second cluster whose only broker does not exist: provisioning cannot finish
    from tests.conftest import free_port

    cluster = f"c{uuid.uuid4().hex[:8]}"
    operator.ok("cluster", "create", cluster)
    operator.ok("cluster", "group", "create", f"{cluster}-a", "--cluster", cluster)
    node = operator.json(
        "cluster",
        "node",
        "add",
        f"{cluster}-a-0",
        "--group",
        f"{cluster}-a",
        "--endpoint",
        f"127.0.0.1:{free_port()}",
    )
    assert node["endpoint"].startswith("127.0.0.1:")
    deadline = time.monotonic() + 30  # the registration's reconcile runs in Celery
    while operator.json("cluster", "node", "list", "--group", f"{cluster}-a")[0]["health"] != "unreachable":
        assert time.monotonic() < deadline, "the unreachable node was never marked so"
        time.sleep(0.5)
    ns = f"t{uuid.uuid4().hex[:10]}"
    operator.ok("tenant", "create", ns, "--cluster", cluster)
    result = operator("topic", "create", "stuck", "--tenant", ns, "--wait-timeout", "3")
    assert result.exit_code == 8, result.output
    assert "still" in result.stderr
    # a key that cannot reach its brokers in time still shows its secret (it is never shown again)
    key = operator("key", "create", "--tenant", ns, "--wait-timeout", "2", "-o", "json")
    assert key.exit_code == 8, key.output
    assert json.loads(key.stdout)["secret"]
    ha = {row["group"]: row for row in operator.json("cluster", "ha", "--cluster", cluster)}
    assert ha[f"{cluster}-a"]["writable"] is False and ha[f"{cluster}-a"]["master"] == f"{cluster}-a-0"


def test_permissions_exit_4_for_a_viewer(stack: Stack, operator: Mqctl, tenant: str, mqctl: Mqctl) -> None:
    username = f"viewer{uuid.uuid4().hex[:8]}"
    token = stack.create_user(username)
    operator.ok("tenant", "member", "add", tenant, username, "--role", "viewer")
    assert {m["user"]: m["role"] for m in operator.json("tenant", "member", "list", tenant)}[
        username
    ] == "viewer"

    viewer = {"MQCTL_API_URL": stack.url, "MQCTL_TOKEN": token, "MQCTL_TENANT": tenant}
    assert mqctl("topic", "list", env=viewer).exit_code == 0  # members read
    denied = mqctl("topic", "create", "nope", env=viewer)
    assert denied.exit_code == 4, denied.output
    assert denied.stderr.startswith("error: ")
    # operators only
    assert mqctl("tenant", "create", f"v{uuid.uuid4().hex[:8]}", env=viewer).exit_code == 4
    # another tenant's objects do not exist for a member
    assert mqctl("tenant", "get", "demo", env=viewer).exit_code == 3
    operator.ok("tenant", "member", "remove", tenant, username)


def test_acl_and_quota_commands(stack: Stack, operator: Mqctl, tenant: str) -> None:
    operator.ok("topic", "create", "orders")
    policy = operator.json(
        "acl", "create", "--resource-type", "Topic", "--resource", "orders", "-a", "Pub", "-a", "Sub",
        "--source-cidr", "10.0.0.0/8",
    )  # fmt: skip
    assert policy["status"] == "active" and policy["actions"] == ["Pub", "Sub"]
    with BrokerAdminClient(stack.broker, token=stack.admin_token) as client:
        assert str(policy["id"]) in {p.name for p in client.list_acls(tenant)}
    assert [p["id"] for p in operator.json("acl", "list")] == [policy["id"]]
    assert operator.json("acl", "update", str(policy["id"]), "--decision", "Deny")["decision"] == "Deny"
    operator.ok("acl", "delete", str(policy["id"]), "--yes")
    assert operator.json("acl", "list") == []

    quota = operator.json("quota", "set", "--max-topics", "5", "--produce-messages-per-s", "100")
    assert quota["status"] == "active" and quota["max_topics"] == 5
    shown = {row["limit"]: row for row in operator.json("quota", "show")["limits"]}
    assert shown["max_topics"]["effective"] == 5 and shown["max_topics"]["override"] == 5
    assert (
        shown["max_groups"]["override"] is None
        and shown["max_groups"]["effective"] == shown["max_groups"]["plan"]
    )
    # the same scope again patches the override instead of failing
    assert operator.json("quota", "set", "--max-topics", "6")["max_topics"] == 6
    topic_quota = operator.json("quota", "set", "--topic", "orders", "--produce-messages-per-s", "10")
    assert topic_quota["scope"] == "topic"
    assert sorted(q["scope"] for q in operator.json("quota", "list")) == ["tenant", "topic"]
    assert operator("quota", "set").exit_code == 2
    operator.ok("quota", "delete", "--topic", "orders", "--yes")
    operator.ok("quota", "delete", "--yes")
    assert operator.json("quota", "list") == []
    assert operator("quota", "delete", "--yes").exit_code == 3


def test_cluster_commands_and_audit(stack: Stack, operator: Mqctl, tenant: str) -> None:
    clusters = operator.json("cluster", "list")
    assert any(c["is_default"] for c in clusters)
    nodes = operator.json("cluster", "node", "list")
    local = next(n for n in nodes if n["endpoint"] == stack.broker)
    assert local["health"] == "healthy" and local["broker_id"] == 0
    ha = operator.json("cluster", "ha")
    assert any(row["master_endpoint"] == stack.broker and row["writable"] for row in ha)
    assert {"standard"} <= {p["name"] for p in operator.json("billing", "plans")}

    operator.ok("topic", "create", "audited", "--no-wait")
    events = operator.json("tenant", "audit", tenant)
    assert {"create"} <= {e["action"] for e in events}
    assert any(e["object_type"] == "topic" for e in events)


def test_admin_output_formats(broker: BrokerProcess, mqctl: Mqctl) -> None:
    args = (
        "admin",
        "--broker",
        broker.target,
        "-o",
        "json",
        "topic",
        "create",
        "acme%orders",
        "--queues",
        "2",
    )
    [created] = json.loads(mqctl.ok(*args).stdout)
    assert created["name"] == "acme%orders"
    listed = yaml.safe_load(
        mqctl.ok("admin", "--broker", broker.target, "-o", "yaml", "topic", "list").stdout
    )
    assert [(t["name"], t["queue_count"]) for t in listed] == [("acme%orders", 2)]
    legacy = json.loads(mqctl.ok("admin", "--broker", broker.target, "--json", "topic", "list").stdout)
    assert legacy == listed
    assert mqctl("admin", "--broker", broker.target, "-o", "xml", "topic", "list").exit_code == 2


def test_alert_rule_and_event_commands(stack: Stack, operator: Mqctl, tenant: str) -> None:
    # given a consumer group
    operator.ok("group", "create", "billing")
    # when rules are created on it, one per channel
    by_mail = operator.json(
        "alert-rule", "create", "billing-lag", "--group", "billing", "--lag-threshold", "100",
        "--email", "ops@acme.example",
    )  # fmt: skip
    hook = operator.json(
        "alert-rule", "create", "billing-dlq", "--group", "billing", "--dlq-threshold", "1",
        "--webhook-url", "https://hooks.acme.example/mq",
    )  # fmt: skip
    # then they are the control plane's rules, the webhook's signing secret shown once at creation
    assert by_mail["channel"] == "email" and by_mail["lag_threshold"] == 100 and by_mail["enabled"] is True
    assert by_mail["group_name"] == "billing"
    assert hook["channel"] == "webhook" and hook["signing_secret"]
    assert operator.json("alert-rule", "secret", "billing-dlq")["signing_secret"] == hook["signing_secret"]
    rotated = operator.json("alert-rule", "rotate-secret", "billing-dlq")["signing_secret"]
    assert rotated != hook["signing_secret"]
    assert operator.json("alert-rule", "secret", "billing-dlq")["signing_secret"] == rotated
    assert [r["name"] for r in operator.json("alert-rule", "list")] == ["billing-dlq", "billing-lag"]
    assert operator.json("alert-rule", "get", "billing-lag")["id"] == by_mail["id"]
    # and an update changes only what it names; a new target switches the channel
    changed = operator.json("alert-rule", "update", "billing-lag", "--lag-threshold", "500", "--disable")
    assert changed["lag_threshold"] == 500 and changed["enabled"] is False
    assert changed["email"] == "ops@acme.example"
    switched = operator.json(
        "alert-rule", "update", "billing-lag", "--webhook-url", "https://hooks.acme.example/b"
    )
    assert switched["channel"] == "webhook" and switched["email"] == ""
    # bad input: exit 2 for usage, 3 for what does not exist
    assert operator("alert-rule", "update", "billing-lag").exit_code == 2
    new = ("alert-rule", "create", "x", "--lag-threshold", "1")
    assert operator(*new, "--group", "billing").exit_code == 2  # no channel
    both = ("--email", "a@acme.example", "--webhook-url", "https://hooks.acme.example/c")
    assert operator(*new, "--group", "billing", *both).exit_code == 2
    assert operator(*new, "--group", "nogroup", "--email", "a@acme.example").exit_code == 3
    assert operator("alert-rule", "get", "nosuch").exit_code == 3
    # nothing fired yet
    assert operator.json("alert-event", "list", "--rule", "billing-dlq") == []
    assert operator("alert-event", "list", "--rule", "nosuch").exit_code == 3
    operator.ok("alert-rule", "delete", "billing-lag", "--yes")
    assert [r["name"] for r in operator.json("alert-rule", "list")] == ["billing-dlq"]
    assert operator("alert-rule", "get", "billing-lag").exit_code == 3
