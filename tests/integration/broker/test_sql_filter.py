"""SQL92 subscription filters on a real broker: only matching messages are delivered."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.integration.broker.conftest import V2, messages, status_code

pytestmark = pytest.mark.integration


def _send(v2: V2, topic: str, props: dict[str, str], tag: str | None = None) -> None:
    sp = pb.SystemProperties(
        message_id=uuid.uuid4().hex.upper(),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=pb.MessageType.NORMAL,
        born_host="tester",
    )
    if tag is not None:
        sp.tag = tag
    msg = pb.Message(topic=v2.res(topic), body=b"x", user_properties=props, system_properties=sp)
    response = v2.stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=v2.md, timeout=10)
    assert response.status.code == pb.Code.OK


def _receive_sql(
    v2: V2, group: str, topic: str, sql: str, poll_s: float = 1
) -> list[svc.ReceiveMessageResponse]:
    request = svc.ReceiveMessageRequest(
        group=v2.res(group),
        message_queue=pb.MessageQueue(topic=v2.res(topic), id=0),
        filter_expression=pb.FilterExpression(type=pb.FilterType.SQL, expression=sql),
        batch_size=32,
    )
    request.invisible_duration.FromSeconds(30)
    request.long_polling_timeout.FromMilliseconds(int(poll_s * 1000))
    return list(v2.stub.ReceiveMessage(request, metadata=v2.md, timeout=poll_s + 5))


def test_sql_filter_delivers_only_matching(admin: BrokerAdminClient, v2: V2) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=4)
    admin.create_group("g1", namespace="acme")
    for i in range(20):
        props = {"a": str(i), "b": "x" if i % 2 == 0 else "y"}
        if i % 5 == 0:
            props["region"] = f"eu-{i}"
        _send(v2, "orders", props, tag="TagA" if i < 15 else "TagB")
    got: list[int] = []
    for _ in range(3):
        got += [
            int(m.user_properties["a"])
            for m in messages(_receive_sql(v2, "g1", "orders", "a > 10 AND b = 'x'"))
        ]
    assert sorted(got) == [12, 14, 16, 18]
    # Another group, other operators; the tag is visible as TAGS.
    admin.create_group("g2", namespace="acme")
    sql = "(a BETWEEN 3 AND 6 OR region LIKE 'eu-1%') AND TAGS IN ('TagA') AND region IS NOT NULL"
    got = [int(m.user_properties["a"]) for m in messages(_receive_sql(v2, "g2", "orders", sql))]
    assert sorted(got) == [5, 10]
    # Messages the filter rejected count as consumed for g1: nothing comes back later.
    assert messages(_receive_sql(v2, "g1", "orders", "a IS NOT NULL", poll_s=0.5)) == []


def test_match_behind_a_long_non_matching_backlog(admin: BrokerAdminClient, v2: V2) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=1)
    admin.create_group("g1", namespace="acme")
    for i in range(300):
        _send(v2, "orders", {"n": str(i)})
    _send(v2, "orders", {"n": "wanted", "k": "1"})
    started = time.monotonic()
    got = messages(_receive_sql(v2, "g1", "orders", "k = 1", poll_s=5))
    assert [m.user_properties["n"] for m in got] == ["wanted"]
    assert time.monotonic() - started < 3


def test_invalid_sql_is_illegal_filter_expression(admin: BrokerAdminClient, v2: V2) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=1)
    admin.create_group("g1", namespace="acme")
    responses = _receive_sql(v2, "g1", "orders", "a > AND b = 'x'")
    assert status_code(responses) == pb.Code.ILLEGAL_FILTER_EXPRESSION
    status = next(r.status for r in responses if r.WhichOneof("content") == "status")
    assert "position 4" in status.message


def test_invalid_sql_refused_at_subscription(admin: BrokerAdminClient, v2: V2) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=1)
    admin.create_group("g1", namespace="acme")

    def settings(sql: str) -> pb.Settings:
        return pb.Settings(
            client_type=pb.ClientType.SIMPLE_CONSUMER,
            subscription=pb.Subscription(
                group=v2.res("g1"),
                subscriptions=[
                    pb.SubscriptionEntry(
                        topic=v2.res("orders"),
                        expression=pb.FilterExpression(type=pb.FilterType.SQL, expression=sql),
                    )
                ],
            ),
        )

    done = threading.Event()

    def commands():  # type: ignore[no-untyped-def]
        yield svc.TelemetryCommand(settings=settings("a IN ("))
        yield svc.TelemetryCommand(settings=settings("a IN ('x')"))
        done.wait(10)

    stream = v2.stub.Telemetry(commands(), metadata=v2.md, timeout=10)
    assert next(stream).status.code == pb.Code.ILLEGAL_FILTER_EXPRESSION
    assert next(stream).status.code == pb.Code.OK
    done.set()
    stream.cancel()


def test_pull_applies_sql_and_moves_past_non_matching(admin: BrokerAdminClient, v2: V2) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=1)
    admin.create_group("g1", namespace="acme")
    for i in range(6):
        _send(v2, "orders", {"n": str(i)})
    mq = pb.MessageQueue(topic=v2.res("orders"), id=0)

    def pull(offset: int, sql: str) -> tuple[list[str], int, float]:
        request = svc.PullMessageRequest(
            group=v2.res("g1"),
            message_queue=mq,
            offset=offset,
            batch_size=32,
            filter_expression=pb.FilterExpression(type=pb.FilterType.SQL, expression=sql),
        )
        request.long_polling_timeout.FromSeconds(5)
        started = time.monotonic()
        frames = list(v2.stub.PullMessage(request, metadata=v2.md, timeout=15))
        found = [f.message.user_properties["n"] for f in frames if f.WhichOneof("content") == "message"]
        return found, frames[-1].next_offset, time.monotonic() - started

    assert pull(0, "n >= 4")[:2] == (["4", "5"], 6)
    # nothing matches: the answer comes at once with the offset moved past what was read
    found, next_offset, took = pull(0, "n > 100")
    assert (found, next_offset) == ([], 6)
    assert took < 3
    bad = list(
        v2.stub.PullMessage(
            svc.PullMessageRequest(
                group=v2.res("g1"),
                message_queue=mq,
                offset=0,
                filter_expression=pb.FilterExpression(type=pb.FilterType.SQL, expression="n >"),
            ),
            metadata=v2.md,
            timeout=15,
        )
    )
    assert bad[0].status.code == pb.Code.ILLEGAL_FILTER_EXPRESSION
