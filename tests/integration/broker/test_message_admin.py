"""MessageAdmin on a real broker: queries, test sends, trace, offset reset, dead letters and redrive,
and the broker-side retry backoff (issue 5)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mqcloud.admin_client import BrokerAdminClient, BrokerAdminError
from mqcloud.admin_messages import MessageAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

from .conftest import V2, BrokerProcess, messages

pytestmark = pytest.mark.integration


@pytest.fixture
def msgs(broker: BrokerProcess) -> Iterator[MessageAdminClient]:
    client = MessageAdminClient(broker.target)
    yield client
    client.close()


def _setup(admin: BrokerAdminClient, queues: int = 2, **group: object) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=queues)
    admin.create_group("g1", namespace="acme", **group)  # type: ignore[arg-type]


def _id(resp: svc.SendMessageResponse) -> str:
    return str(resp.entries[0].message_id)


def test_query_by_id_key_time_and_queue(admin: BrokerAdminClient, v2: V2, msgs: MessageAdminClient) -> None:
    _setup(admin)
    before = int(time.time() * 1000) - 1
    first = _id(v2.send("orders", b"one", tag="t1", keys=("k-1",)))
    second = _id(v2.send("orders", b"two", keys=("k-2",)))
    after = int(time.time() * 1000) + 1

    [found] = msgs.query_messages("acme%orders", message_id=first)
    assert (found.message_id, found.body, found.tag, list(found.keys), found.topic) == (
        first,
        b"one",
        "t1",
        ["k-1"],
        "acme%orders",
    )
    assert found.store_time_ms > 0 and found.body_size == 3
    assert found.system_properties["UNIQ_KEY"] == first and not found.properties
    assert [x.message_id for x in msgs.query_messages("acme%orders", key="k-2")] == [second]
    assert msgs.query_messages("acme%orders", key="nope") == []
    in_range = msgs.query_messages("acme%orders", begin_ms=before, end_ms=after)
    assert [x.message_id for x in in_range] == [first, second]
    assert msgs.query_messages("acme%orders", begin_ms=after, end_ms=after + 1000) == []
    q = found.queue_id
    assert msgs.query_messages("acme%orders", queue_id=q, offset=found.queue_offset)[0].message_id == first
    # another topic never shows the message
    admin.create_topic("other", namespace="acme", queue_count=1)
    assert msgs.query_messages("acme%other", message_id=first) == []
    # bad input
    with pytest.raises(BrokerAdminError) as err:
        msgs.query_messages("acme%orders", queue_id=9, offset=0)
    assert err.value.code == "INVALID_ARGUMENT"
    with pytest.raises(BrokerAdminError) as err:
        msgs.query_messages("acme%missing", key="k")
    assert err.value.code == "NOT_FOUND"


def test_test_message_and_its_trace(admin: BrokerAdminClient, v2: V2, msgs: MessageAdminClient) -> None:
    _setup(admin)
    sent = msgs.send_test_message("acme%orders", b"probe", tag="t", keys=["p-1"], properties={"a": "1"})
    assert sent.message_id and sent.queue_id in (0, 1)
    [got] = messages(v2.receive("g1", "orders", invisible_s=30))
    assert got.system_properties.message_id == sent.message_id and got.user_properties["a"] == "1"
    change = svc.ChangeInvisibleDurationRequest(
        group=v2.res("g1"),
        topic=v2.res("orders"),
        receipt_handle=got.system_properties.receipt_handle,
        message_id=sent.message_id,
    )
    change.invisible_duration.FromSeconds(0)
    resp = v2.stub.ChangeInvisibleDuration(change, metadata=v2.md, timeout=10)
    assert resp.status.code == pb.Code.OK
    [again] = messages(v2.receive("g1", "orders", poll_s=3))
    assert again.system_properties.delivery_attempt == 2
    assert v2.ack("g1", "orders", again).status.code == pb.Code.OK
    deadline = time.monotonic() + 5
    events: list[str] = []
    while time.monotonic() < deadline:
        trace = msgs.message_trace("acme%orders", sent.message_id)
        events = [e.event for e in trace]
        if events[-1:] == ["acked"]:
            break
        time.sleep(0.2)
    assert events == ["stored", "delivered", "nacked", "delivered", "acked"]
    delivered = [e for e in trace if e.event == "delivered"]
    assert [e.attempt for e in delivered] == [1, 2]
    assert {e.client_id for e in delivered} == {v2.client_id} and delivered[0].group == "acme%g1"
    # the trace belongs to the topic: another topic sees nothing
    admin.create_topic("other", namespace="acme", queue_count=1)
    assert msgs.message_trace("acme%other", sent.message_id) == []
    # an invalid test message is refused with the reason
    with pytest.raises(BrokerAdminError) as err:
        msgs.send_test_message("acme%orders", b"")
    assert err.value.code == "INVALID_ARGUMENT"
    for too_late in (int(time.time() * 1000) + 4 * 86_400_000, 2**63 - 1):  # past the 3-day limit
        with pytest.raises(BrokerAdminError, match="more than 259200000 ms ahead") as err:
            msgs.send_test_message("acme%orders", b"x", delivery_time_ms=too_late)
        assert err.value.code == "INVALID_ARGUMENT"


def test_trace_survives_a_restart(
    broker: BrokerProcess, admin: BrokerAdminClient, v2: V2, msgs: MessageAdminClient
) -> None:
    _setup(admin)
    mid = _id(v2.send("orders", b"x"))
    time.sleep(0.5)  # the tracer writes every 200 ms
    broker.stop()
    broker.start()
    with MessageAdminClient(broker.target) as fresh:
        assert [e.event for e in fresh.message_trace("acme%orders", mid)] == ["stored"]


def test_reset_offset_moves_a_live_consumer(
    admin: BrokerAdminClient, v2: V2, msgs: MessageAdminClient
) -> None:
    _setup(admin, queues=1)
    ids = []
    for i in range(3):
        ids.append(_id(v2.send("orders", f"m{i}".encode())))
        time.sleep(0.005)  # distinct store milliseconds: "by time" below names exactly one message
    got = messages(v2.receive("g1", "orders", batch=8))
    for msg in got:
        v2.ack("g1", "orders", msg)
    assert [g.system_properties.message_id for g in got] == ids
    # when: back to the beginning, without restarting anything
    [point] = msgs.reset_offset("acme%g1", "acme%orders", "beginning")
    assert (point.queue_id, point.offset) == (0, 0)
    again = messages(v2.receive("g1", "orders", batch=8))
    assert [g.system_properties.message_id for g in again] == ids
    # to the end: nothing left
    assert msgs.reset_offset("acme%g1", "acme%orders", "end")[0].offset == 3
    assert messages(v2.receive("g1", "orders", poll_s=0.5)) == []
    # by time: the first message stored at or after it
    [stored] = msgs.query_messages("acme%orders", message_id=ids[2])
    assert msgs.reset_offset("acme%g1", "acme%orders", "time", stored.store_time_ms)[0].offset == 2
    assert [g.system_properties.message_id for g in messages(v2.receive("g1", "orders"))] == ids[2:]
    with pytest.raises(BrokerAdminError) as err:
        msgs.reset_offset("acme%nope", "acme%orders", "end")
    assert err.value.code == "NOT_FOUND"


def test_dead_letters_listed_and_redriven_for_their_group_only(
    admin: BrokerAdminClient, v2: V2, msgs: MessageAdminClient
) -> None:
    _setup(admin, queues=1, max_delivery_attempts=1)
    admin.create_group("g2", namespace="acme")
    poison = _id(v2.send("orders", b"poison", keys=("bad",)))
    fine = _id(v2.send("orders", b"fine"))
    for msg in messages(v2.receive("g2", "orders", batch=8)):  # g2 consumes both at once
        v2.ack("g2", "orders", msg)
    [_, f1] = messages(v2.receive("g1", "orders", batch=8, invisible_s=1))
    v2.ack("g1", "orders", f1)
    time.sleep(1.2)
    assert messages(v2.receive("g1", "orders", poll_s=0.5)) == []  # out of attempts: to the DLQ
    [dead] = msgs.list_dead_letters("acme%g1")
    assert (dead.message_id, dead.topic, dead.body) == (poison, "acme%orders", b"poison")
    assert dead.system_properties["__MQ_DLQ_ATTEMPTS"] == "1"
    assert dead.system_properties["__MQ_DLQ_ORIGIN_TOPIC"] == "acme%orders"
    assert msgs.list_dead_letters("acme%g2") == []

    # when: re-driven
    assert msgs.redrive("acme%g1", [poison]) == 1
    # then: g1 gets it again; g2, which consumed it, does not
    [back] = messages(v2.receive("g1", "orders", poll_s=3))
    assert back.system_properties.message_id == poison and back.system_properties.delivery_attempt == 1
    v2.ack("g1", "orders", back)
    assert messages(v2.receive("g2", "orders", poll_s=0.5)) == []
    # and it is not listed or re-driven twice
    assert msgs.list_dead_letters("acme%g1") == []
    assert len(msgs.list_dead_letters("acme%g1", include_redriven=True)) == 1
    assert msgs.redrive("acme%g1", all=True) == 0
    time.sleep(0.4)
    trace = msgs.message_trace("acme%orders", poison)
    assert [e.event for e in trace if e.group == "acme%g1"] == [
        "delivered",
        "dead_lettered",
        "redriven",
        "delivered",
        "acked",
    ]
    assert [e.event for e in trace if e.group == "acme%g2"] == ["delivered", "acked"]
    assert fine != poison


def test_retry_waits_for_the_group_backoff(
    admin: BrokerAdminClient, v2: V2, msgs: MessageAdminClient
) -> None:
    _setup(admin, queues=1, retry_delays_ms=[2500])
    mid = _id(v2.send("orders", b"slow"))
    [first] = messages(v2.receive("g1", "orders", invisible_s=1))
    t0 = time.monotonic()
    # the invisible time ends after 1 s; the group's backoff holds it 2.5 s more
    assert messages(v2.receive("g1", "orders", poll_s=2)) == []
    [again] = messages(v2.receive("g1", "orders", poll_s=4))
    waited = time.monotonic() - t0
    assert again.system_properties.message_id == mid and again.system_properties.delivery_attempt == 2
    assert 3.0 <= waited < 6.0, waited
    time.sleep(0.4)
    retried = [e for e in msgs.message_trace("acme%orders", mid) if e.event == "retried"]
    assert len(retried) == 1 and "2500 ms" in retried[0].detail
    assert first.system_properties.delivery_attempt == 1
