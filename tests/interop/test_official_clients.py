"""The official RocketMQ 5 clients (PyPI rocketmq-python-client 5.1.2, npm rocketmq-client-nodejs 1.0.8)
against our broker: every message sent arrives once acked, with body, tag, keys and user properties
intact; unacked messages come back after their invisible time."""

from __future__ import annotations

import pytest

from tests.interop.conftest import Interop

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(600)]

N = 12
FIELDS = ("body", "tag", "keys", "properties")


def _assert_intact(sent: list[dict[str, object]], received: list[dict[str, object]]) -> None:
    by_id = {m["message_id"]: m for m in received}
    assert len(by_id) == len(received), "a message was delivered twice"
    assert set(by_id) == {m["message_id"] for m in sent}
    for s in sent:
        r = by_id[s["message_id"]]
        assert {k: r[k] for k in FIELDS} == {k: s[k] for k in FIELDS}
        assert r["corrupted"] is False
        assert r["delivery_attempt"] == 1


@pytest.mark.parametrize(
    ("producer", "consumer", "mode"),
    [
        ("py", "py", "simple"),
        ("py", "py", "push"),
        ("node", "node", "simple"),
        ("node", "node", "push"),
        ("py", "node", "simple"),
        ("node", "py", "simple"),
        ("py", "node", "push"),
        ("node", "py", "push"),
    ],
)
def test_round_trip(interop: Interop, producer: str, consumer: str, mode: str) -> None:
    topic, group = interop.topic(), interop.group()
    sent = interop.run(producer, "produce", topic, count=N)["sent"]
    assert len(sent) == N
    received = interop.run(consumer, mode, topic, group, count=N)["received"]
    _assert_intact(sent, received)
    # acked: nothing comes back to the group
    again = interop.run("py", "simple", topic, group, count=1, timeout=5)["received"]
    assert again == []


@pytest.mark.parametrize("lang", ["py", "node"])
def test_unacked_messages_come_back(interop: Interop, lang: str) -> None:
    topic, group = interop.topic(), interop.group()
    sent = interop.run(lang, "produce", topic, count=3)["sent"]
    out = interop.run(lang, "redeliver", topic, group, count=3, invisible=3, timeout=40)
    assert {m["message_id"] for m in out["first"]} == {m["message_id"] for m in sent}
    assert {m["message_id"] for m in out["second"]} == {m["message_id"] for m in sent}
    for m in out["second"]:
        assert m["delivery_attempt"] == 2
        assert float(m["after_s"]) < 15  # type: ignore[arg-type]
    for m in out["first"]:
        assert m["delivery_attempt"] == 1


@pytest.fixture
def short_invisible(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker's invisible time for receives that name none (the official push consumers send
    none) cut to 2 s, and its renewals looked at often (set before the ``interop`` broker starts)."""
    for name, value in (
        ("DEFAULT_INVISIBLE_MS", "2000"),
        ("AUTO_RENEW_PERIOD_S", "0.2"),
        ("AUTO_RENEW_AHEAD_MS", "1000"),
        ("AUTO_RENEW_SLICE_MS", "1500"),
    ):
        monkeypatch.setenv(f"MQ_BROKER_{name}", value)


@pytest.mark.parametrize("lang", ["py", "node"])
def test_a_slow_push_listener_gets_each_message_once(
    short_invisible: None, interop: Interop, lang: str
) -> None:
    """The official PushConsumers receive with auto_renew and no invisible duration: the broker keeps
    the messages invisible while the listener (4 s each, twice the 2 s) runs."""
    topic, group = interop.topic(), interop.group()
    sent = interop.run(lang, "produce", topic, count=3)["sent"]
    received = interop.run(lang, "slow-push", topic, group, count=3, delay=4, timeout=40)["received"]
    _assert_intact(sent, received)  # once each, attempt 1
    assert interop.run("py", "simple", topic, group, count=1, timeout=5)["received"] == []
