"""Drive the official RocketMQ 5 Python client (PyPI rocketmq-python-client) against a broker.

Runs in the interop venv, not ours. Prints one JSON object on the last stdout line.

    py_driver.py produce|simple|push|slow-push|redeliver|fifo-produce|delay-produce|tx-produce
                 --endpoint H:P --namespace NS --topic T --group G
                 --count N --prefix P [--invisible S] [--timeout S] [--delay S] [--ak AK --sk SK] [--tls 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)


def view(m) -> dict:
    return {
        "message_id": m.message_id,
        "body": m.body.decode(),
        "tag": m.tag,
        "keys": sorted(m.keys or []),
        "properties": dict(m.properties or {}),
        "delivery_attempt": m.delivery_attempt,
        "corrupted": bool(m.corrupted),
        "message_group": m.message_group,
        "received_at": time.time(),
    }


def config(a) -> ClientConfiguration:
    creds = Credentials(a.ak, a.sk) if a.ak else Credentials()
    return ClientConfiguration(a.endpoint, creds, a.namespace, request_timeout=5)


def produce(a) -> dict:
    p = Producer(config(a), (a.topic,), tls_enable=a.tls)
    p.startup()
    sent = []
    try:
        for i in range(a.count):
            m = Message()
            m.topic = a.topic
            m.body = f"{a.prefix}-{i}".encode()
            m.tag = f"tag{i % 3}"
            m.keys = f"{a.prefix}-k{i}"
            m.keys = f"{a.prefix}-kk{i}"
            m.add_property("idx", str(i))
            m.add_property("origin", "python")
            r = p.send(m)
            sent.append(
                {
                    "message_id": r.message_id,
                    "body": f"{a.prefix}-{i}",
                    "tag": f"tag{i % 3}",
                    "keys": sorted([f"{a.prefix}-k{i}", f"{a.prefix}-kk{i}"]),
                    "properties": {"idx": str(i), "origin": "python"},
                }
            )
    finally:
        p.shutdown()
    return {"sent": sent}


def simple(a) -> dict:
    c = SimpleConsumer(
        config(a), a.group, {a.topic: FilterExpression("*")}, await_duration=3, tls_enable=a.tls
    )
    c.startup()
    got: list[dict] = []
    deadline = time.monotonic() + a.timeout
    try:
        while len(got) < a.count and time.monotonic() < deadline:
            for m in c.receive(16, 15) or []:
                c.ack(m)
                got.append(view(m))
    finally:
        c.shutdown()
    return {"received": got}


def redeliver(a) -> dict:
    """Receive without acking; the same messages must come back after the invisible time."""
    c = SimpleConsumer(
        config(a), a.group, {a.topic: FilterExpression("*")}, await_duration=3, tls_enable=a.tls
    )
    c.startup()
    first: list[dict] = []
    second: list[dict] = []
    deadline = time.monotonic() + a.timeout
    try:
        while len(first) < a.count and time.monotonic() < deadline:
            first += [view(m) for m in c.receive(16, a.invisible) or []]
        t_first = time.monotonic()
        while len(second) < len(first) and time.monotonic() < deadline:
            for m in c.receive(16, 15) or []:
                c.ack(m)
                second.append(view(m) | {"after_s": round(time.monotonic() - t_first, 2)})
    finally:
        c.shutdown()
    return {"first": first, "second": second}


class Collect(MessageListener):
    def __init__(self) -> None:
        self.got: list[dict] = []
        self.lock = threading.Lock()

    def consume(self, message) -> ConsumeResult:
        with self.lock:
            self.got.append(view(message))
        return ConsumeResult.SUCCESS


def _push_run(a, listener: Collect, settle_s: float) -> dict:
    """Run a PushConsumer until ``--count`` deliveries (or ``--timeout``), then ``settle_s`` more."""
    c = PushConsumer(config(a), a.group, listener, {a.topic: FilterExpression("*")})
    c.startup()
    deadline = time.monotonic() + a.timeout
    try:
        while len(listener.got) < a.count and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(settle_s)
    finally:
        c.shutdown()
    return {"received": listener.got}


def push(a) -> dict:
    return _push_run(a, Collect(), 1.5)  # let the acks go out


class Slow(Collect):
    """A listener that takes ``seconds`` over each message (longer than its invisible time)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def consume(self, message) -> ConsumeResult:
        result = super().consume(message)
        time.sleep(self.seconds)
        return result


def slow_push(a) -> dict:
    """A PushConsumer whose listener takes ``--delay`` s per message; every delivery is recorded
    (a message given again while its listener still runs would show up twice). After the last, the
    listeners finish and their acks go out, and any redelivery would show."""
    return _push_run(a, Slow(a.delay), a.delay * 2 + 1.5)


def fifo_produce(a) -> dict:
    """count messages over three message groups, in order within each group."""
    p = Producer(config(a), (a.topic,))
    p.startup()
    sent = []
    try:
        for i in range(a.count):
            group, seq = f"{a.prefix}-g{i % 3}", i // 3
            m = Message()
            m.topic = a.topic
            m.body = f"{group}-{seq}".encode()
            m.message_group = group
            r = p.send(m)
            sent.append({"message_id": r.message_id, "message_group": group, "seq": seq})
    finally:
        p.shutdown()
    return {"sent": sent}


def delay_produce(a) -> dict:
    """count messages due --delay seconds from now (whole seconds: the client sends seconds)."""
    p = Producer(config(a), (a.topic,))
    p.startup()
    sent = []
    try:
        due = int(time.time()) + int(a.delay)
        for i in range(a.count):
            m = Message()
            m.topic = a.topic
            m.body = f"{a.prefix}-{i}".encode()
            m.delivery_timestamp = due
            r = p.send(m)
            sent.append({"message_id": r.message_id, "due": due})
    finally:
        p.shutdown()
    return {"sent": sent}


class Decide(TransactionChecker):
    """Answers the broker's checks from the message's "decision" property."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.lock = threading.Lock()

    def check(self, message) -> TransactionResolution:
        with self.lock:
            self.asked.append(message.message_id)
        decision = (message.properties or {}).get("decision")
        return TransactionResolution.COMMIT if decision == "check-commit" else TransactionResolution.ROLLBACK


def tx_produce(a) -> dict:
    """Transactions ended by the client (commit, rollback) and left open for the broker's check."""
    checker = Decide()
    p = Producer(config(a), (a.topic,), checker)
    p.startup()
    sent = []
    try:
        for i in range(a.count):
            decision = ("commit", "rollback", "check-commit", "check-rollback")[i % 4]
            m = Message()
            m.topic = a.topic
            m.body = f"{a.prefix}-{i}".encode()
            m.add_property("decision", decision)
            tx = p.begin_transaction()
            r = p.send(m, tx)
            if decision == "commit":
                tx.commit()
            elif decision == "rollback":
                tx.rollback()
            sent.append({"message_id": r.message_id, "decision": decision})
        open_ids = {x["message_id"] for x in sent if x["decision"].startswith("check")}
        deadline = time.monotonic() + a.timeout
        while time.monotonic() < deadline:
            with checker.lock:
                if open_ids <= set(checker.asked):
                    break
            time.sleep(0.2)
        time.sleep(1.0)  # let the last answers go out
    finally:
        p.shutdown()
    with checker.lock:
        return {"sent": sent, "asked": sorted(set(checker.asked))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "mode",
        choices=[
            "produce",
            "simple",
            "push",
            "slow-push",
            "redeliver",
            "fifo-produce",
            "delay-produce",
            "tx-produce",
        ],
    )
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--namespace", default="")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default="")
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--prefix", default="py")
    ap.add_argument("--invisible", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--delay", type=float, default=5)
    ap.add_argument("--ak", default="")
    ap.add_argument("--sk", default="")
    ap.add_argument("--tls", type=lambda v: v == "1", default=False)
    a = ap.parse_args()
    modes = {
        "produce": produce,
        "simple": simple,
        "push": push,
        "slow-push": slow_push,
        "redeliver": redeliver,
        "fifo-produce": fifo_produce,
        "delay-produce": delay_produce,
        "tx-produce": tx_produce,
    }
    result = modes[a.mode](a)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
