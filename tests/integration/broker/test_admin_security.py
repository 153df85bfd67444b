"""Admin API: access keys, ACL policies and quotas on a real broker (issue 6, provisioning only)."""

from __future__ import annotations

import stat

import pytest

from mqcloud.admin_client import (
    BrokerAdminClient,
    BrokerAdminError,
    quota_limits,
    secret_fingerprint,
    to_dict,
)

from .conftest import BrokerProcess

pytestmark = pytest.mark.integration

LIMITS = {"produce_messages_per_s": 100, "storage_bytes": 1 << 30, "max_topics": 5}


def _seed(admin: BrokerAdminClient) -> None:
    admin.put_access_key("AKacme1", secret_key="s3cret", namespace="acme", expires_at_ms=4_000_000_000_000)
    admin.put_access_key("AKglobex", secret_key="other", namespace="globex")
    admin.put_acl(
        "7",
        namespace="acme",
        principal="AKacme1",
        resource_type="Topic",
        resource_pattern="ord",
        pattern_type="PREFIXED",
        actions=["Pub", "Sub"],
        source_cidrs=["10.0.0.1/8"],
        decision="Allow",
    )
    admin.put_quota("acme", LIMITS)
    admin.put_quota("acme", {"produce_messages_per_s": 10}, topic="orders")
    admin.put_quota("acme", {"consume_bytes_per_s": 1000}, group="acme%billing")


def _state(admin: BrokerAdminClient) -> dict[str, object]:
    return {
        "keys": [to_dict(k) for k in admin.list_access_keys()],
        "acls": [to_dict(p) for p in admin.list_acls()],
        "quotas": [to_dict(q) for q in admin.list_quotas()],
    }


def test_put_list_delete_and_persistence(broker: BrokerProcess) -> None:
    with BrokerAdminClient(broker.target) as admin:
        # given
        _seed(admin)
        # then: listed, filtered by namespace, normalised
        keys = admin.list_access_keys("acme")
        # a listing carries a fingerprint, never the secret (dev mode: no operator asked)
        assert [(k.access_key, k.secret_key, k.secret_fingerprint, k.expires_at_ms) for k in keys] == [
            ("AKacme1", "", secret_fingerprint("AKacme1", "s3cret"), 4_000_000_000_000)
        ]
        assert admin.list_access_keys("acme", include_secrets=True)[0].secret_key == ""
        assert [k.access_key for k in admin.list_access_keys()] == ["AKacme1", "AKglobex"]
        (policy,) = admin.list_acls("acme")
        assert to_dict(policy) | {"create_time_ms": "0", "update_time_ms": "0"} == {
            "name": "7",
            "namespace": "acme",
            "principal": "AKacme1",
            "resource_type": "ACL_RESOURCE_TYPE_TOPIC",
            "resource_pattern": "ord",
            "pattern_type": "ACL_PATTERN_TYPE_PREFIXED",
            "actions": ["ACL_ACTION_PUB", "ACL_ACTION_SUB"],
            "source_cidrs": ["10.0.0.0/8"],
            "decision": "ACL_DECISION_ALLOW",
            "create_time_ms": "0",
            "update_time_ms": "0",
        }
        assert admin.list_acls("globex") == []
        quotas = {(q.topic, q.group): quota_limits(q) for q in admin.list_quotas("acme")}
        assert quotas == {
            ("", ""): LIMITS,
            ("acme%orders", ""): {"produce_messages_per_s": 10},
            ("", "acme%billing"): {"consume_bytes_per_s": 1000},
        }
        # puts are idempotent upserts: same content, same timestamps
        before = _state(admin)
        _seed(admin)
        assert _state(admin) == before
        revoked = admin.put_access_key("AKacme1", secret_key="s3cret", namespace="acme", status="revoked")
        assert to_dict(revoked)["status"] == "ACCESS_KEY_STATUS_REVOKED"
    secrets = broker.data_dir / "security.json"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600

    # when: the broker restarts on the same data dir
    broker.stop()
    broker.start()
    with BrokerAdminClient(broker.target) as admin:
        # then: everything is back
        after = _state(admin)
        assert [k["status"] for k in after["keys"]] == [
            "ACCESS_KEY_STATUS_REVOKED",
            "ACCESS_KEY_STATUS_ACTIVE",
        ]
        assert after["acls"] == before["acls"]
        assert after["quotas"] == before["quotas"]
        # deletes; a second delete is NOT_FOUND (callers that want it gone accept that)
        admin.delete_access_key("AKacme1", "acme")
        admin.delete_acl("acme", "7")
        admin.delete_quota("acme", topic="acme%orders")
        admin.delete_quota("acme", group="billing")
        for call in (
            lambda: admin.delete_access_key("AKacme1"),
            lambda: admin.delete_access_key("AKglobex", "acme"),  # another tenant's key is invisible
            lambda: admin.delete_acl("acme", "7"),
            lambda: admin.delete_quota("acme", topic="orders"),
        ):
            with pytest.raises(BrokerAdminError) as info:
                call()
            assert info.value.code == "NOT_FOUND"
        assert [k.access_key for k in admin.list_access_keys()] == ["AKglobex"]
        assert admin.list_acls() == []
        assert [(q.topic, q.group) for q in admin.list_quotas()] == [("", "")]


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        pytest.param(
            lambda c: c.put_access_key("AK1", secret_key="", namespace="acme"), "secret_key", id="no-secret"
        ),
        pytest.param(
            lambda c: c.put_access_key("AK1", secret_key="s", namespace=""), "namespace", id="no-ns"
        ),
        pytest.param(
            lambda c: c.put_access_key("bad key!", secret_key="s", namespace="acme"),
            "access_key",
            id="bad-ak",
        ),
        pytest.param(
            lambda c: c.put_acl("p", namespace="acme", principal="*", resource_type="Topic", actions=[]),
            "action",
            id="no-actions",
        ),
        pytest.param(
            lambda c: c.put_acl(
                "p",
                namespace="acme",
                principal="*",
                resource_type="Topic",
                actions=["Pub"],
                resource_pattern="globex%orders",
            ),
            "resource_pattern",
            id="cross-namespace-pattern",
        ),
        pytest.param(
            lambda c: c.put_acl(
                "p",
                namespace="acme",
                principal="*",
                resource_type="Topic",
                actions=["Pub"],
                source_cidrs=["10.0.0.300/8"],
            ),
            "source_cidrs",
            id="bad-cidr",
        ),
        pytest.param(
            lambda c: c.put_acl(
                "p", namespace="acme", principal="*", resource_type="Unspecified", actions=["Pub"]
            ),
            "resource_type",
            id="no-resource-type",
        ),
        pytest.param(
            lambda c: c.put_quota("acme", {"max_topics": 1}, topic="orders", group="billing"),
            "not both",
            id="topic-and-group",
        ),
        pytest.param(lambda c: c.put_quota("acme", {"max_topics": -1}), "max_topics", id="negative-limit"),
        pytest.param(
            lambda c: c.put_quota("acme", {"max_topics": 1}, topic="globex%orders"),
            "namespace",
            id="foreign-topic",
        ),
    ],
)
def test_invalid_input_is_refused_with_a_clear_message(
    broker: BrokerProcess, call: object, fragment: str
) -> None:
    with BrokerAdminClient(broker.target) as admin:
        with pytest.raises(BrokerAdminError) as info:
            call(admin)  # type: ignore[operator]
        assert info.value.code == "INVALID_ARGUMENT"
        assert fragment in info.value.message
        assert admin.list_access_keys() == [] and admin.list_acls() == [] and admin.list_quotas() == []


def test_an_access_key_cannot_move_to_another_namespace(broker: BrokerProcess) -> None:
    with BrokerAdminClient(broker.target) as admin:
        admin.put_access_key("AK1", secret_key="s", namespace="acme")
        with pytest.raises(BrokerAdminError) as info:
            admin.put_access_key("AK1", secret_key="x", namespace="globex")
        assert info.value.code == "ALREADY_EXISTS"
        assert [(k.namespace, k.secret_fingerprint) for k in admin.list_access_keys()] == [
            ("acme", secret_fingerprint("AK1", "s"))
        ]
