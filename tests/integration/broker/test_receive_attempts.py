"""A receive retried with its attempt_id gets what the lost try took (a real broker): the same
messages again, for a FIFO group too (whose message groups the lost try had made busy), and nothing
that was acked since."""

from __future__ import annotations

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.integration.broker.conftest import V2, messages, status_code
from tests.integration.broker.test_fifo import _send

pytestmark = pytest.mark.integration

OK = 20000


def _ids(got: list[pb.Message]) -> list[str]:
    return sorted(m.system_properties.message_id for m in got)


def test_a_retry_gets_the_same_messages_and_a_new_attempt_gets_others(
    admin: BrokerAdminClient, v2: V2
) -> None:
    admin.create_topic("jobs", namespace="acme", queue_count=2)  # the v2 fixture's namespace
    admin.create_group("workers", namespace="acme")
    sent = sorted(v2.send("jobs", f"j{i}".encode()).entries[0].message_id for i in range(3))
    first = messages(v2.receive("workers", "jobs", batch=2, attempt_id="try-1"))
    assert len(first) == 2
    retried = messages(v2.receive("workers", "jobs", batch=2, attempt_id="try-1"))  # the answer was "lost"
    assert _ids(retried) == _ids(first)
    assert {m.system_properties.delivery_attempt for m in retried} == {1}
    for m in retried:  # the handles of the retry are good
        assert v2.ack("workers", "jobs", m).status.code == OK
    rest = messages(v2.receive("workers", "jobs", batch=2, attempt_id="try-2"))
    assert _ids(first + rest) == sent
    assert v2.ack("workers", "jobs", rest[0]).status.code == OK
    # acked since: a retry of the first attempt finds nothing of it, and nothing else is left
    again = v2.receive("workers", "jobs", batch=2, attempt_id="try-1", poll_s=0.3)
    assert status_code(again) == pb.Code.MESSAGE_NOT_FOUND


def test_a_fifo_retry_is_not_blocked_by_its_own_lost_try(admin: BrokerAdminClient, v2: V2) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=2, message_type="FIFO")
    admin.create_group("g1", namespace="acme", fifo=True)
    for seq in range(2):
        _send(v2, "cart-7", seq)
    first = messages(v2.receive("g1", "orders", attempt_id="a"))
    assert [m.user_properties["seq"] for m in first] == ["0"]
    # another attempt finds the message group busy; the retry of "a" gets its message again
    assert messages(v2.receive("g1", "orders", attempt_id="b", poll_s=0.3)) == []
    retried = messages(v2.receive("g1", "orders", attempt_id="a"))
    assert [m.system_properties.message_id for m in retried] == [first[0].system_properties.message_id]
    assert v2.ack("g1", "orders", retried[0]).status.code == OK
    assert [m.user_properties["seq"] for m in messages(v2.receive("g1", "orders", attempt_id="c"))] == ["1"]
