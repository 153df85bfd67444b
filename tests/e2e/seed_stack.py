"""Seed the e2e control plane through the services: plan, the test broker, tenants, users, a key.

Run as a script with the server's environment (arguments: the broker's gRPC and metrics addresses);
prints one JSON line (the SDK credentials).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import django

sys.path.insert(0, str(Path.cwd()))
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402

from tenants.choices import MembershipRole  # noqa: E402
from tenants.management.commands.bootstrap_demo import register_local_broker  # noqa: E402
from tenants.services import access_keys, clusters, groups, tenants, topics  # noqa: E402
from tenants.services.audit import Actor  # noqa: E402

PASSWORD = "console-e2e-pass"


def main() -> None:
    users = get_user_model().objects
    operator = users.create_user("ops", password=PASSWORD, is_staff=True)
    owner = users.create_user("olivia", password=PASSWORD)
    viewer = users.create_user("victor", password=PASSWORD)
    actor = Actor(user=operator)
    tenants.create_plan(actor, name="standard", display_name="Standard", is_default=True)
    node = register_local_broker(actor, sys.argv[1])
    clusters.update_registry_object(actor, node, {"metrics_endpoint": sys.argv[2]})
    acme = tenants.create_tenant(actor, owner=owner, name="Acme", namespace="acme")
    tenants.create_tenant(actor, owner=owner, name="Beta", namespace="beta")
    tenants.add_member(actor, None, acme, viewer, MembershipRole.VIEWER)
    topics.create_topic(actor, acme, name="orders", queue_count=2)
    groups.create_group(actor, acme, name="billing")
    key, secret = access_keys.create_access_key(actor, acme, "e2e SDK")
    print(json.dumps({"access_key": key.access_key, "secret_key": secret}))


main()
