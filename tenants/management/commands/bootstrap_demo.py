"""Create the demo operator account and demo tenant, and write ``<data dir>/demo.json``.

Idempotent: a second run keeps the password and token from the first, so scripts that read
``demo.json`` keep working across restarts of ``mqctl standalone``.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from rest_framework.authtoken.models import Token

from tenants.crypto import decrypt_secret
from tenants.models import (
    AccessKey,
    BrokerCluster,
    BrokerGroup,
    BrokerNode,
    ConsumerGroup,
    Plan,
    Tenant,
    Topic,
)
from tenants.services.access_keys import create_access_key
from tenants.services.audit import Actor
from tenants.services.clusters import create_registry_object, update_registry_object
from tenants.services.groups import create_group
from tenants.services.topics import create_topic

DEMO_USERNAME = "operator"
DEMO_TENANT_NAMESPACE = "demo"
DEFAULT_PLAN = "standard"
LOCAL_CLUSTER = "local"
LOCAL_GROUP = "local-a"
LOCAL_NODE = "local-a-0"
DEMO_TOPIC = "demo-topic"
DEMO_GROUP = "demo-group"


def register_local_broker(actor: Actor, endpoint: str, metrics_endpoint: str = "") -> BrokerNode:
    """The standalone broker as the default cluster's only node; endpoint changes are applied.

    ``metrics_endpoint`` (its --metrics-listen address) lets the overview show storage against quota.
    """
    cluster = BrokerCluster.objects.filter(name=LOCAL_CLUSTER).first() or create_registry_object(
        actor, BrokerCluster(name=LOCAL_CLUSTER, description="mqctl standalone", is_default=True)
    )
    assert isinstance(cluster, BrokerCluster)
    group = BrokerGroup.objects.filter(cluster=cluster, name=LOCAL_GROUP).first() or create_registry_object(
        actor, BrokerGroup(cluster=cluster, name=LOCAL_GROUP)
    )
    assert isinstance(group, BrokerGroup)
    found = BrokerNode.objects.filter(name=LOCAL_NODE).first()
    wanted = {"endpoint": endpoint, "metrics_endpoint": metrics_endpoint}
    if found is None:
        node = create_registry_object(actor, BrokerNode(group=group, name=LOCAL_NODE, **wanted))
    elif changed := {k: v for k, v in wanted.items() if getattr(found, k) != v}:
        node = update_registry_object(actor, found, changed)
    else:
        node = found
    assert isinstance(node, BrokerNode)
    return node


class Command(BaseCommand):
    help = "Create the demo operator and tenant; write demo.json to the data dir."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument("--broker", default="", help="broker endpoint HOST:PORT, when one runs")
        parser.add_argument("--broker-metrics", default="", help="the broker's Prometheus HOST:PORT")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(settings.DATA_DIR) / "demo.json"
        previous: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        password = previous.get("console", {}).get("password") or secrets.token_urlsafe(12)
        with transaction.atomic():
            user_model = get_user_model()
            user, _ = user_model.objects.get_or_create(
                username=DEMO_USERNAME, defaults={"email": "operator@localhost"}
            )
            user.is_staff = user.is_superuser = True
            user.set_password(password)
            user.save()
            token, _ = Token.objects.get_or_create(user=user)
            plan = Plan.objects.filter(is_default=True).first()
            if plan is None:
                plan, _ = Plan.objects.get_or_create(
                    name=DEFAULT_PLAN, defaults={"display_name": "Standard", "is_default": True}
                )
            tenant, _ = Tenant.objects.get_or_create(
                namespace=DEMO_TENANT_NAMESPACE, defaults={"name": "Demo tenant", "plan": plan}
            )
            # Keep the key of an earlier run when it still exists and works; else issue one.
            previous_key = previous.get("tenant", {}).get("access_key")
            key = AccessKey.objects.filter(tenant=tenant, access_key=previous_key).first()
            if key is not None and key.is_usable:
                secret = decrypt_secret(key.secret_encrypted)
            else:
                key, secret = create_access_key(Actor(user=user), tenant, "demo key (bootstrap_demo)")
            if options["broker"]:
                # Provisioning runs in Celery once this commits: the broker gets the topic and group.
                actor = Actor(user=user)
                register_local_broker(actor, options["broker"], options["broker_metrics"])
                if not Topic.objects.filter(tenant=tenant, name=DEMO_TOPIC).exists():
                    create_topic(actor, tenant, name=DEMO_TOPIC, queue_count=4)
                if not ConsumerGroup.objects.filter(tenant=tenant, name=DEMO_GROUP).exists():
                    create_group(actor, tenant, name=DEMO_GROUP)
        base = options["base_url"].rstrip("/")
        demo: dict[str, Any] = {
            "console": {"url": f"{base}/", "username": DEMO_USERNAME, "password": password},
            "admin_url": f"{base}/admin/",
            "api": {"url": f"{base}/api/v1/", "schema": f"{base}/api/schema/", "token": token.key},
            "tenant": {
                "name": tenant.name,
                "namespace": tenant.namespace,
                "access_key": key.access_key,
                "secret_key": secret,
            },
        }
        if options["broker"]:
            demo["broker"] = {"endpoint": options["broker"]}
            if settings.BROKER_ADMIN_TOKEN:  # the operator credential of its admin API
                demo["broker"]["admin_token"] = settings.BROKER_ADMIN_TOKEN
            demo["tenant"].update(topic=DEMO_TOPIC, group=DEMO_GROUP)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(demo, indent=2))
        tmp.chmod(0o600)
        tmp.replace(path)
        self.stdout.write(json.dumps(demo))
