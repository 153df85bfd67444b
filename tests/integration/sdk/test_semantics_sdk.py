"""Issue 5 through our SDK: transaction check-backs answered by a TransactionChecker, broadcasting
consumption, and the retry backoff of a group seen by a consumer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqcloud import (
    BadRequestError,
    ClientConfig,
    FilterExpression,
    Message,
    MessageView,
    NotFoundError,
    Producer,
    SimpleConsumer,
    TransactionResolution,
)
from mqcloud.admin_client import BrokerAdminClient
from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess
from tests.integration.sdk.conftest import Env

pytestmark = pytest.mark.integration

NS = "sem"


@pytest.fixture
def fast_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BrokerProcess]:
    # check-backs after 1 s, then every 0.5 s
    monkeypatch.setenv("MQ_BROKER_TRANSACTION_TIMEOUT_MS", "1000")
    monkeypatch.setenv("MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS", "500")
    process = BrokerProcess(tmp_path / "broker", free_port())
    process.start()
    yield process
    process.kill()


def _drain(c: SimpleConsumer, want: int, timeout: float = 15) -> list[MessageView]:
    got: list[MessageView] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for m in c.receive(16, 30):
            c.ack(m)
            got.append(m)
    return got


def test_transaction_checker_answers_check_backs(fast_checks: BrokerProcess) -> None:
    with BrokerAdminClient(fast_checks.target) as admin:
        admin.create_topic("pay", namespace=NS, queue_count=2, message_type="TRANSACTION")
        admin.create_group("g1", namespace=NS)
    config = ClientConfig(fast_checks.target, namespace=NS)
    asked: list[str] = []
    lock = threading.Lock()

    def checker(message: MessageView) -> TransactionResolution:
        with lock:
            asked.append(message.message_id)
        decision = message.properties.get("decision")
        if decision == "commit":
            return TransactionResolution.COMMIT
        if decision == "rollback":
            return TransactionResolution.ROLLBACK
        return TransactionResolution.UNKNOWN

    with (
        Producer(config, ["pay"], transaction_checker=checker) as p,
        SimpleConsumer(config, "g1", {"pay": "*"}, await_duration=2) as c,
    ):
        # given: three transactions left open by a producer that "crashed" before ending them
        receipts = {}
        for decision in ("commit", "rollback", "unknown"):
            tx = p.begin_transaction()
            receipts[decision] = p.send(
                Message("pay", decision.encode(), properties={"decision": decision}), tx
            )
        # then: the broker asks, the checker answers, only the committed one is delivered
        got = _drain(c, 1, timeout=20)
        assert [m.body for m in got] == [b"commit"]
        assert got[0].message_id == receipts["commit"].message_id
        time.sleep(2)  # more checks: the rolled back one never comes, the unknown one is asked again
        assert c.receive(16, 2) == []
        with lock:
            assert receipts["commit"].message_id in asked
            assert asked.count(receipts["unknown"].message_id) >= 2


def test_broadcast_group_delivers_every_message_to_every_member(env: Env) -> None:
    group = env.new_group(broadcast=True)
    clustering = env.new_group()
    with (
        SimpleConsumer(env.config, group, {env.topic: "*"}, await_duration=1) as a,
        SimpleConsumer(env.config, group, {env.topic: "*"}, await_duration=1) as b,
        SimpleConsumer(env.config, clustering, {env.topic: "*"}, await_duration=1) as c1,
        SimpleConsumer(env.config, clustering, {env.topic: "*"}, await_duration=1) as c2,
        Producer(env.config, [env.topic]) as p,
    ):
        sent = {p.send(Message(env.topic, f"m{i}".encode())).message_id for i in range(6)}
        # every member of the broadcast group gets all six, each acking its own
        assert {m.message_id for m in _drain(a, 6)} == sent
        assert {m.message_id for m in _drain(b, 6)} == sent
        assert a.receive(16, 1) == [] and b.receive(16, 1) == []
        # a clustering group shares them out
        first = _drain(c1, 6, timeout=3)
        second = _drain(c2, 6 - len(first), timeout=5)
        assert {m.message_id for m in first} | {m.message_id for m in second} == sent
        assert len(first) + len(second) == 6


def test_unacked_message_returns_after_the_group_backoff(env: Env) -> None:
    group = env.new_group(retry_initial_ms=2000, retry_max_ms=60_000, retry_multiplier=2.0)
    with (
        SimpleConsumer(env.config, group, {env.topic: "*"}, await_duration=1) as c,
        Producer(env.config, [env.topic]) as p,
    ):
        mid = p.send(Message(env.topic, b"x")).message_id
        first = None
        deadline = time.monotonic() + 10
        while first is None and time.monotonic() < deadline:
            first = next((m for m in c.receive(16, 1) if m.message_id == mid), None)
        t0 = time.monotonic()  # invisible 1 s, then the first backoff step (2 s)
        again = None
        while again is None and time.monotonic() - t0 < 10:
            again = next((m for m in c.receive(16, 5) if m.message_id == mid), None)
        waited = time.monotonic() - t0
        assert again is not None and again.delivery_attempt == 2
        assert 2.5 <= waited < 6, waited
        c.ack(again)


def test_delay_messages_arrive_on_time_and_recall_cancels_one(env: Env) -> None:
    topic = env.new_topic(message_type="DELAY")
    with (
        SimpleConsumer(env.config, env.group, {topic: "*"}, await_duration=1) as c,
        Producer(env.config, [topic]) as p,
    ):
        at = time.time() + 2
        keep = p.send(Message(topic, b"keep", delivery_timestamp=at))
        drop = p.send(Message(topic, b"drop", delivery_timestamp=at))
        by_handle = p.send(Message(topic, b"drop-too", delivery_timestamp=at))
        assert keep.recall_handle and drop.recall_handle
        # recall by receipt (its broker) and by the bare handle (the topic's brokers in turn)
        assert p.recall(topic, drop) == drop.message_id
        assert p.recall(topic, by_handle.recall_handle) == by_handle.message_id
        assert p.recall(topic, drop) == drop.message_id  # recalling again is idempotent
        with pytest.raises(BadRequestError):
            p.recall(topic, "bm90aGluZw.AAAA")  # forged
        got = _drain(c, 1, timeout=10)
        assert [(m.message_id, m.body) for m in got] == [(keep.message_id, b"keep")]
        assert time.time() >= at  # never early
        assert c.receive(16, 3) == []  # the recalled ones never come
        with pytest.raises(NotFoundError):  # delivered: too late to recall
            p.recall(topic, keep)


def test_sql92_subscription_and_fifo_order_through_the_sdk(env: Env) -> None:
    topic = env.new_topic(message_type="FIFO")
    fifo = env.new_group(fifo=True)
    sql = env.new_group()
    with Producer(env.config, [topic]) as p:
        for i in range(6):
            group = "a" if i % 2 == 0 else "b"
            p.send(Message(topic, f"{group}{i}".encode(), properties={"n": str(i)}, message_group=group))
    # an SQL92 subscriber gets only what matches
    with SimpleConsumer(env.config, sql, {topic: FilterExpression.sql92("n >= 4")}, await_duration=1) as c:
        assert sorted(m.body for m in _drain(c, 2)) == [b"a4", b"b5"]
        assert c.receive(16, 2) == []
    # a FIFO group sees each message group in send order, one in flight per group
    seen: dict[str, list[bytes]] = {"a": [], "b": []}
    with SimpleConsumer(env.config, fifo, {topic: "*"}, await_duration=1) as c:
        deadline = time.monotonic() + 20
        while sum(map(len, seen.values())) < 6 and time.monotonic() < deadline:
            batch = c.receive(16, 30)
            groups = [m.message_group for m in batch]
            assert len(groups) == len(set(groups)), f"two in flight from one group: {groups}"
            for m in batch:
                seen[m.message_group or ""].append(m.body)
                c.ack(m)
    assert seen == {"a": [b"a0", b"a2", b"a4"], "b": [b"b1", b"b3", b"b5"]}
