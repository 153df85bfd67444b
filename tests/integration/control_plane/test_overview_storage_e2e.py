"""The overview's storage against the quota, read from a real broker's Prometheus endpoint."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from tenants.models import BrokerNode, Membership, Tenant
from tests.conftest import free_port
from tests.integration.broker.conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _ok(response: Any, code: int = 200) -> Any:
    assert response.status_code == code, response.content
    return response.json()


@pytest.fixture
def metered_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker that serves its Prometheus metrics on a loopback port."""
    process = BrokerProcess(
        tmp_path / "broker",
        free_port(),
        metrics_listen=f"127.0.0.1:{free_port()}",
        env={"MQ_BROKER_STORAGE_SCAN_S": "0.5"},  # the broker recounts what tenants hold this often
    )
    process.start()
    yield process
    process.kill()


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_storage_used_against_the_quota(metered_broker: BrokerProcess, operator_client: APIClient) -> None:
    api = operator_client
    # given: a plan allowing 100 KiB, the broker registered with its metrics endpoint, a topic
    _ok(
        api.post(
            "/api/v1/plans/", {"name": "tiny", "is_default": True, "storage_bytes": 100 * 1024}, format="json"
        ),
        201,
    )
    cluster = _ok(
        api.post("/api/v1/broker-clusters/", {"name": "local", "is_default": True}, format="json"), 201
    )
    bg = _ok(
        api.post("/api/v1/broker-groups/", {"cluster": cluster["id"], "name": "broker-a"}, format="json"), 201
    )
    node = _ok(
        api.post(
            "/api/v1/broker-nodes/",
            {
                "group": bg["id"],
                "name": "broker-a-0",
                "endpoint": metered_broker.target,
                "metrics_endpoint": metered_broker.metrics_listen,
            },
            format="json",
        ),
        201,
    )
    tenant = _ok(api.post("/api/v1/tenants/", {"name": "Acme", "namespace": "acme"}, format="json"), 201)
    topic = _ok(
        api.post(
            "/api/v1/topics/", {"tenant": tenant["id"], "name": "orders", "queue_count": 1}, format="json"
        ),
        201,
    )
    viewer = get_user_model().objects.create_user("vic")
    Membership.objects.create(user=viewer, tenant=Tenant.objects.get(pk=tenant["id"]), role="viewer")
    page = Client()
    page.force_login(viewer)
    assert 'id="storage-stat"' in page.get("/t/acme/").content.decode()

    # when: 40 KiB of messages are stored
    for _ in range(4):
        _ok(api.post(f"/api/v1/topics/{topic['id']}/messages/", {"body": "x" * 10240}, format="json"), 201)

    # then: the overview's storage card shows about 40 KiB of the 100 KiB allowed, and the meter.
    # The broker recounts every 0.5 s, so a read may come between two sends: wait for all four.
    deadline = time.monotonic() + 10
    while True:
        html = page.get("/t/acme/overview/storage/").content.decode()
        used = re.search(r'id="storage-used">([\d.]+) KiB<', html)
        if (used and float(used.group(1)) >= 40) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert used and 40 <= float(used.group(1)) < 50, _text(html)
    assert "of 100.0 KiB" in _text(html)
    assert re.search(r'<span style="width: 4\d%">', html)

    # a node registered without its metrics endpoint is explained, not counted as 0
    BrokerNode.objects.filter(pk=node["id"]).update(metrics_endpoint="")
    text = _text(page.get("/t/acme/overview/storage/").content.decode())
    assert "— of 100.0 KiB" in text and "has no metrics endpoint registered" in text

    # a broker that does not answer: the reason is shown
    BrokerNode.objects.filter(pk=node["id"]).update(metrics_endpoint=f"127.0.0.1:{free_port()}")
    text = _text(page.get("/t/acme/overview/storage/").content.decode())
    assert "did not report its storage" in text
