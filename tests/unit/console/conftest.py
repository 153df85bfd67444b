"""The console tests reuse the control-plane platform: one cluster, two tenants, a user per role."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.unit.tenants.conftest import ROLES, Platform, _static_root, gateway, platform

__all__ = ("ROLES", "Platform", "_static_root", "browser_for", "gateway", "platform")


@pytest.fixture
def browser_for(platform: Platform):  # type: ignore[no-untyped-def]
    """A Django test client signed in as the user of a role (None: anonymous)."""

    def make(role: str | None) -> Client:
        client = Client()
        if role is not None:
            client.force_login(platform.users[role])
        return client

    return make
