"""Lag history: the Celery beat task samples a real broker's lag, the group page charts it."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import ConsumerGroup, GroupLagSample, Membership, Tenant
from tenants.services.lag_history import lag_history
from tenants.tasks import sample_group_lag_task
from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _ok(response: Any, code: int = 200) -> Any:
    assert response.status_code == code, response.content
    return response.json()


def _chart(html: str) -> dict[str, Any]:
    match = re.search(r'<script id="lag-history-data" type="application/json">(.*?)</script>', html, re.S)
    assert match, "no lag history chart data on the page"
    return dict(json.loads(match.group(1)))


def test_sampled_lag_is_charted_on_the_group_page(broker: BrokerProcess, operator_client: APIClient) -> None:
    api = operator_client
    cluster = _ok(
        api.post("/api/v1/broker-clusters/", {"name": "local", "is_default": True}, format="json"), 201
    )
    bg = _ok(
        api.post("/api/v1/broker-groups/", {"cluster": cluster["id"], "name": "broker-a"}, format="json"), 201
    )
    node = {"group": bg["id"], "name": "broker-a-0", "endpoint": broker.target}
    _ok(api.post("/api/v1/broker-nodes/", node, format="json"), 201)
    tenant = _ok(api.post("/api/v1/tenants/", {"name": "Acme", "namespace": "acme"}, format="json"), 201)
    topic = _ok(
        api.post(
            "/api/v1/topics/", {"tenant": tenant["id"], "name": "orders", "queue_count": 1}, format="json"
        ),
        201,
    )
    _ok(api.post("/api/v1/consumer-groups/", {"tenant": tenant["id"], "name": "billing"}, format="json"), 201)
    group = ConsumerGroup.objects.get(name="billing")
    viewer = get_user_model().objects.create_user("vic")
    Membership.objects.create(user=viewer, tenant=Tenant.objects.get(pk=tenant["id"]), role="viewer")
    page = Client()
    page.force_login(viewer)
    # before any sample: the empty state says where history comes from
    assert 'id="lag-history-empty"' in page.get("/t/acme/groups/billing/").content.decode()

    # given: 3 messages, one consumed
    for i in range(3):
        _ok(api.post(f"/api/v1/topics/{topic['id']}/messages/", {"body": f"m{i}"}, format="json"), 201)
    v2 = V2(broker.target, namespace="acme")
    try:
        [first] = messages(v2.receive("billing", "orders", batch=1))
        v2.ack("billing", "orders", first)
        # when: beat samples
        assert sample_group_lag_task.delay().get()["sampled"] == 1
        # and the rest is consumed, then beat samples again
        rest = messages(v2.receive("billing", "orders", batch=16))
        for m in rest:
            v2.ack("billing", "orders", m)
        assert len(rest) == 2
        sample_group_lag_task.delay().get()
    finally:
        v2.close()

    # then: two samples, 2 then 0, on the chart and in its table
    assert list(GroupLagSample.objects.filter(group=group).values_list("total_lag", "consumed")) == [
        (2, 1),
        (0, 3),
    ]
    html = page.get("/t/acme/groups/billing/").content.decode()
    assert _chart(html)["values"] == [2, 0]
    assert re.search(r'id="lag-history-table".*<td class="num">2</td>.*<td class="num">0</td>', html, re.S)
    assert 'aria-current="page">24h<' in html
    assert _chart(page.get("/t/acme/groups/billing/?range=1h").content.decode())["values"] == [2, 0]

    # the API gives the same history to members; a range it does not know is a 400
    viewer_api = APIClient()
    viewer_api.force_authenticate(viewer)
    history = _ok(viewer_api.get(f"/api/v1/consumer-groups/{group.pk}/lag-history/?range=1h"))
    assert history["group"] == "billing" and [p["lag"] for p in history["points"]] == [2, 0]
    assert viewer_api.get(f"/api/v1/consumer-groups/{group.pk}/lag-history/?range=2y").status_code == 400

    # samples past the week are pruned at the next run; a sample 2 hours old is out of the 1h range
    GroupLagSample.objects.create(
        tenant=group.tenant, group=group, sampled_at=timezone.now() - timedelta(days=8), total_lag=9
    )
    GroupLagSample.objects.create(
        tenant=group.tenant, group=group, sampled_at=timezone.now() - timedelta(hours=2), total_lag=7
    )
    report = sample_group_lag_task.delay().get()
    assert report["pruned"] == 1 and not GroupLagSample.objects.filter(total_lag=9).exists()
    assert _chart(page.get("/t/acme/groups/billing/?range=1h").content.decode())["values"] == [2, 0, 0]
    assert _chart(page.get("/t/acme/groups/billing/?range=24h").content.decode())["values"] == [7, 2, 0, 0]

    # a broker that is gone: no sample (a gap, not a false 0)
    broker.kill()
    gone = sample_group_lag_task.delay().get()
    assert gone["sampled"] == 0 and gone["unreachable"] == ["acme%billing"]
    assert GroupLagSample.objects.filter(group=group).count() == 4


def test_long_ranges_keep_each_buckets_highest_lag() -> None:
    tenant = Tenant.objects.create(name="Acme", namespace="acme")
    group = ConsumerGroup.objects.create(tenant=tenant, name="billing")
    now = timezone.now()
    GroupLagSample.objects.bulk_create(
        GroupLagSample(
            tenant=tenant,
            group=group,
            sampled_at=now - timedelta(minutes=1000 - i),
            total_lag=500 if i == 421 else i % 10,
        )
        for i in range(1000)
    )
    points = lag_history(group, timedelta(days=1), now=now, max_points=100)
    assert len(points) == 100
    assert max(p.lag for p in points) == 500
    assert [p.at for p in points] == sorted(p.at for p in points)
