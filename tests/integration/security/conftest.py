"""Brokers as in production (no development mode, an operator token) for the security tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqcloud.admin_client import BrokerAdminClient
from tests.conftest import free_port
from tests.integration.broker.conftest import V2, BrokerProcess

ADMIN_TOKEN = "operator-token-for-tests"
FAST_METERING = {
    "MQ_BROKER_ADMIN_TOKEN": ADMIN_TOKEN,
    "MQ_BROKER_METERING_FLUSH_S": "1",
    "MQ_BROKER_LAG_SAMPLE_S": "1",
    "MQ_BROKER_STORAGE_SCAN_S": "1",
}


def secure_broker_process(data_dir: Path, **env: str) -> BrokerProcess:
    return BrokerProcess(data_dir, free_port(), dev=False, env={**FAST_METERING, **env})


@pytest.fixture
def secure_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = secure_broker_process(tmp_path / "broker")
    process.start()
    yield process
    process.kill()


@pytest.fixture
def op(secure_broker: BrokerProcess) -> Iterator[BrokerAdminClient]:
    """The broker admin API with operator credentials."""
    client = BrokerAdminClient(secure_broker.target, token=ADMIN_TOKEN)
    yield client
    client.close()


def tenant(op: BrokerAdminClient, ns: str, topic: str = "orders", group: str = "billing") -> tuple[str, str]:
    """A namespace with one topic, one group and one access key; returns (access key, secret)."""
    op.create_topic(f"{ns}%{topic}", queue_count=2, namespace=ns)
    op.create_group(f"{ns}%{group}", namespace=ns)
    ak, secret = f"AK{ns}", f"secret-of-{ns}"
    op.put_access_key(ak, secret_key=secret, namespace=ns)
    return ak, secret


def client(broker: BrokerProcess, ns: str, credentials: tuple[str, str] | None) -> V2:
    return V2(broker.target, namespace=ns, credentials=credentials)
