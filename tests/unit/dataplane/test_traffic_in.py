"""Messages and body bytes stored, per topic (``mq_broker_messages_in`` / ``mq_broker_bytes_in``), as
SendMessage counts them: a single send, a batch of one topic, a batch of several."""

from __future__ import annotations

from dataplane.metrics import BYTES_IN, MESSAGES_IN
from dataplane.services.produce import _count_in
from dataplane.store.message import MessageToStore


def _message(topic: str, size: int) -> MessageToStore:
    return MessageToStore(topic, 0, b"x" * size, {}, 0, 0, 0, ("127.0.0.1", 1))


def _counted(topic: str) -> tuple[float, float]:
    return MESSAGES_IN.labels(topic).value, BYTES_IN.labels(topic).value


def test_sends_count_their_messages_and_bytes_per_topic() -> None:
    before = {t: _counted(t) for t in ("ti%a", "ti%b")}
    _count_in([_message("ti%a", 10)])
    _count_in([_message("ti%a", n) for n in (1, 2, 3)])
    _count_in([_message("ti%a", 5), _message("ti%b", 7), _message("ti%a", 11), _message("ti%b", 1)])
    a, b = _counted("ti%a"), _counted("ti%b")
    assert (a[0] - before["ti%a"][0], a[1] - before["ti%a"][1]) == (6, 10 + 6 + 16)
    assert (b[0] - before["ti%b"][0], b[1] - before["ti%b"][1]) == (2, 8)
