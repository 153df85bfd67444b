"""The control plane's own Prometheus endpoint."""

from __future__ import annotations

import pytest
from django.test import Client

from tenants.models import Plan, Tenant

pytestmark = pytest.mark.django_db


def test_metrics_endpoint_reports_tenants_and_process() -> None:
    plan = Plan.objects.create(name="p", display_name="P", is_default=True)
    Tenant.objects.create(name="Acme", namespace="acme", plan=plan)
    response = Client().get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert 'mq_control_plane_tenants{status="active"} 1.0' in text
    assert "process_cpu_seconds_total" in text
