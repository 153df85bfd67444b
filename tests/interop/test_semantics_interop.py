"""The official Python (rocketmq-python-client 5.1.2) and Node.js (rocketmq-client-nodejs 1.0.8)
clients with FIFO, delay and transactional messages against our broker (issue 5): each client
produces and consumes its own, and the Node flows are also consumed by the Python client."""

from __future__ import annotations

from typing import Any

import pytest

from tests.interop.conftest import Interop

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(600)]

# (producer, consumer): each official client on its own, and Node producing for a Python consumer
PAIRS = [
    pytest.param("py", "py", id="py"),
    pytest.param("node", "node", id="node"),
    pytest.param("node", "py", id="node-to-py"),
]


@pytest.mark.parametrize(("producer", "consumer"), PAIRS)
def test_fifo_order_per_message_group(interop: Interop, producer: str, consumer: str) -> None:
    topic, group = interop.topic("FIFO"), interop.group(fifo=True)
    sent = interop.run(producer, "fifo-produce", topic, count=15)["sent"]
    received = interop.run(consumer, "simple", topic, group, count=15)["received"]
    seq_of = {m["message_id"]: m["seq"] for m in sent}
    assert sorted(seq_of) == sorted(m["message_id"] for m in received)
    by_group: dict[Any, list[Any]] = {}
    for m in received:
        by_group.setdefault(m["message_group"], []).append(seq_of[m["message_id"]])
    assert by_group == {f"{producer}-g{g}": [0, 1, 2, 3, 4] for g in range(3)}


@pytest.mark.parametrize(("producer", "consumer"), PAIRS)
def test_delay_messages_arrive_on_time_not_before(interop: Interop, producer: str, consumer: str) -> None:
    topic, group = interop.topic("DELAY"), interop.group()
    sent = interop.run(producer, "delay-produce", topic, count=5, delay=4)["sent"]
    received = interop.run(consumer, "simple", topic, group, count=5, timeout=30)["received"]
    due = {m["message_id"]: float(m["due"]) for m in sent}  # type: ignore[arg-type]
    assert sorted(due) == sorted(m["message_id"] for m in received)
    for m in received:
        at = float(m["received_at"])  # type: ignore[arg-type]
        assert due[m["message_id"]] - 0.05 <= at < due[m["message_id"]] + 5, (at, due[m["message_id"]])


@pytest.mark.parametrize(("producer", "consumer"), PAIRS)
def test_transactions_and_check_backs(interop: Interop, producer: str, consumer: str) -> None:
    topic, group = interop.topic("TRANSACTION"), interop.group()
    out = interop.run(producer, "tx-produce", topic, count=8, timeout=30)
    sent, asked = out["sent"], set(out["asked"])
    fate = {m["message_id"]: m["decision"] for m in sent}
    # the broker asked the producer's checker about every transaction left open
    assert {mid for mid, d in fate.items() if str(d).startswith("check")} <= asked
    received = interop.run(consumer, "simple", topic, group, count=4, timeout=20)["received"]
    assert sorted(fate[m["message_id"]] for m in received) == ["check-commit"] * 2 + ["commit"] * 2
    # rolled back ones never come
    assert interop.run(consumer, "simple", topic, group, count=1, timeout=4)["received"] == []
