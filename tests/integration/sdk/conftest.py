"""A real broker for the SDK tests, with a namespace, a topic and a group per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mqcloud import ClientConfig
from mqcloud.admin_client import BrokerAdminClient
from tests.integration.broker.conftest import BrokerProcess

NAMESPACE = "sdk"


@dataclass
class Env:
    broker: BrokerProcess
    admin: BrokerAdminClient
    config: ClientConfig
    topic: str
    group: str

    def new_topic(self, message_type: str = "NORMAL", queue_count: int = 4) -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        self.admin.create_topic(
            f"{NAMESPACE}%{name}", queue_count=queue_count, message_type=message_type, namespace=NAMESPACE
        )
        return name

    def new_group(self, **kwargs: object) -> str:
        name = f"g-{uuid.uuid4().hex[:8]}"
        self.admin.create_group(f"{NAMESPACE}%{name}", namespace=NAMESPACE, **kwargs)  # type: ignore[arg-type]
        return name


@pytest.fixture
def env(broker: BrokerProcess) -> Iterator[Env]:
    admin = BrokerAdminClient(broker.target)
    e = Env(broker, admin, ClientConfig(broker.target, namespace=NAMESPACE), "", "")
    e.topic = e.new_topic()
    e.group = e.new_group()
    yield e
    admin.close()
