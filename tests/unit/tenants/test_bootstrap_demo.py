"""``manage.py bootstrap_demo``: the demo operator, tenant and key, written to demo.json, idempotently."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tenants.crypto import decrypt_secret
from tenants.management.commands.bootstrap_demo import LOCAL_NODE
from tenants.models import AccessKey, BrokerNode, Tenant

pytestmark = pytest.mark.django_db


def run_bootstrap(settings: object, data_dir: Path) -> dict[str, object]:
    settings.DATA_DIR = data_dir  # type: ignore[attr-defined]
    out = StringIO()
    call_command("bootstrap_demo", "--base-url", "http://127.0.0.1:9999", stdout=out)
    on_disk = json.loads((data_dir / "demo.json").read_text())
    assert json.loads(out.getvalue().strip().splitlines()[-1]) == on_disk
    return on_disk


def test_creates_operator_tenant_and_key(settings: object, tmp_path: Path) -> None:
    demo = run_bootstrap(settings, tmp_path)
    console, tenant = demo["console"], demo["tenant"]
    assert isinstance(console, dict) and isinstance(tenant, dict)
    user = get_user_model().objects.get(username=console["username"])
    assert user.is_staff and user.check_password(console["password"])
    assert Tenant.objects.filter(namespace=tenant["namespace"]).exists()
    key = AccessKey.objects.get(access_key=tenant["access_key"])
    assert decrypt_secret(key.secret_encrypted) == tenant["secret_key"]
    assert demo["api"]["url"] == "http://127.0.0.1:9999/api/v1/"  # type: ignore[index]
    assert (tmp_path / "demo.json").stat().st_mode & 0o077 == 0


def test_second_run_keeps_password_token_and_key(settings: object, tmp_path: Path) -> None:
    first = run_bootstrap(settings, tmp_path)
    second = run_bootstrap(settings, tmp_path)
    assert second == first
    assert AccessKey.objects.count() == 1
    assert Tenant.objects.count() == 1


def test_registers_the_local_broker_with_its_metrics_endpoint(settings: object, tmp_path: Path) -> None:
    """The overview's storage card scrapes the node's metrics endpoint: standalone registers it."""
    settings.DATA_DIR = tmp_path  # type: ignore[attr-defined]
    args = ["--base-url", "http://127.0.0.1:9999", "--broker", "127.0.0.1:8081"]
    call_command("bootstrap_demo", *args, "--broker-metrics", "127.0.0.1:5557", stdout=StringIO())
    node = BrokerNode.objects.get(name=LOCAL_NODE)
    assert (node.endpoint, node.metrics_endpoint) == ("127.0.0.1:8081", "127.0.0.1:5557")
    # A later start on other ports updates the one node rather than adding another.
    call_command(
        "bootstrap_demo",
        "--broker",
        "127.0.0.1:9091",
        "--broker-metrics",
        "127.0.0.1:6667",
        stdout=StringIO(),
    )
    node = BrokerNode.objects.get(name=LOCAL_NODE)
    assert (node.endpoint, node.metrics_endpoint) == ("127.0.0.1:9091", "127.0.0.1:6667")
    assert BrokerNode.objects.count() == 1
