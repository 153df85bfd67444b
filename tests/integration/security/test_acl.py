"""ACL 2.0 on the data path: deny wins, patterns, source networks; the cache survives a restart."""

from __future__ import annotations

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.integration.broker.conftest import BrokerProcess, messages, status_code

from .conftest import ADMIN_TOKEN, client, tenant

pytestmark = pytest.mark.integration

OK, FORBIDDEN = pb.Code.OK, pb.Code.FORBIDDEN


def test_deny_wins_prefixes_and_networks_and_survive_restart(
    secure_broker: BrokerProcess, op: BrokerAdminClient
) -> None:
    # given: topics orders-a, orders-secret, payments, audit; the key may Pub/Sub on "orders*",
    # a Deny takes Pub on orders-secret away, and "audit" is allowed only from 10.0.0.0/8
    ak, secret = tenant(op, "acme")
    for name in ("orders-a", "orders-secret", "payments", "audit"):
        op.create_topic(f"acme%{name}", queue_count=1, namespace="acme")
    allow = {"namespace": "acme", "principal": ak, "resource_type": "Topic", "decision": "Allow"}
    op.put_acl("1", **allow, resource_pattern="orders", pattern_type="PREFIXED", actions=["Pub", "Sub"])
    op.put_acl("2", **{**allow, "decision": "Deny"}, resource_pattern="orders-secret", actions=["Pub"])
    op.put_acl("3", **allow, resource_pattern="audit", actions=["All"], source_cidrs=["10.0.0.0/8"])
    op.put_acl("4", **{**allow, "principal": "*"}, resource_pattern="orders-secret", actions=["All"])

    def check() -> None:
        v2 = client(secure_broker, "acme", (ak, secret))
        try:
            # then: the allowed prefix works; deny beats both allows; no allow = refused in allow-list mode
            assert v2.send("orders-a").status.code == OK
            denied = v2.send("orders-secret")
            assert denied.status.code == FORBIDDEN
            assert "denies Pub" in denied.status.message
            assert v2.send("payments").status.code == FORBIDDEN
            assert v2.send("audit").status.code == FORBIDDEN  # 127.0.0.1 is not in 10.0.0.0/8
            # Sub on orders-secret is still allowed (the deny is on Pub only); groups have no policy
            assert (
                status_code(v2.receive("billing", "orders-secret", poll_s=0.2)) == pb.Code.MESSAGE_NOT_FOUND
            )
            assert [m.body for m in messages(v2.receive("billing", "orders-a", poll_s=2))] == [b"hello"]
            route = v2.stub.QueryRoute(svc.QueryRouteRequest(topic=v2.res("orders-secret")), metadata=v2.md)
            assert route.status.code == OK  # QueryRoute needs Pub or Sub
            assert (
                v2.stub.QueryRoute(
                    svc.QueryRouteRequest(topic=v2.res("payments")), metadata=v2.md
                ).status.code
                == FORBIDDEN
            )
        finally:
            v2.close()

    check()
    # when: the broker restarts (the control plane is not involved)
    secure_broker.stop()
    secure_broker.start()
    # then: the same decisions come from the persisted cache
    with BrokerAdminClient(secure_broker.target, token=ADMIN_TOKEN) as admin:
        admin.create_topic("acme%orders-b", queue_count=1, namespace="acme")
    check()
    # and: a pushed change applies at once (deleting the deny)
    with BrokerAdminClient(secure_broker.target, token=ADMIN_TOKEN) as admin:
        admin.delete_acl("acme", "2")
    v2 = client(secure_broker, "acme", (ak, secret))
    try:
        assert v2.send("orders-secret").status.code == OK
    finally:
        v2.close()
