"""Secrets never reach a broker's logs, even at DEBUG (issue 10's security checks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcloud import ClientConfig, Credentials, Message, Producer, SimpleConsumer
from mqcloud.admin_client import BrokerAdminClient, BrokerAdminError
from mqcloud.errors import UnauthorizedError
from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess

from .conftest import ADMIN_TOKEN, FAST_METERING, tenant

pytestmark = pytest.mark.integration


def test_secrets_and_the_admin_token_are_never_logged(tmp_path: Path) -> None:
    # given: a production-mode broker logging everything
    broker = BrokerProcess(
        tmp_path / "broker", free_port(), dev=False, env=FAST_METERING, args=("--log-level", "DEBUG")
    )
    broker.start()
    try:
        with BrokerAdminClient(broker.target, token=ADMIN_TOKEN) as op:
            ak, secret = tenant(op, "acme")
            # when: keys are pushed, listed with their secrets, used, and misused
            assert {k.secret_key for k in op.list_access_keys("acme", include_secrets=True)} == {secret}
            config = ClientConfig(broker.target, credentials=Credentials(ak, secret), namespace="acme")
            with Producer(config, topics=["orders"]) as producer:
                producer.send(Message("orders", b"payload"))
            with SimpleConsumer(config, "billing", {"orders": "*"}, await_duration=2) as consumer:
                (received,) = consumer.receive(16, 30)
                consumer.ack(received)
            wrong = "not-" + secret
            bad = ClientConfig(broker.target, credentials=Credentials(ak, wrong), namespace="acme")
            with pytest.raises(UnauthorizedError), Producer(bad, topics=["orders"]) as producer:
                producer.send(Message("orders", b"refused"))
            guessed = BrokerAdminClient(broker.target, token="guessed-" + ADMIN_TOKEN)
            with guessed, pytest.raises(BrokerAdminError, match="UNAUTHENTICATED"):
                guessed.list_access_keys("acme")
        broker.stop()
    finally:
        broker.kill()
    # then: the log says what happened (DEBUG lines included, refusals named) and holds no secret
    logged = "".join(broker.output)
    assert "DEBUG" in logged and "refused" in logged
    texts = [logged, *(p.read_text(errors="replace") for p in (tmp_path / "broker").rglob("*.log"))]
    for needle in (secret, wrong, ADMIN_TOKEN):
        assert all(needle not in text for text in texts), needle
