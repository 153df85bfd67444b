"""A real broker process (``mqctl broker start``) and an operator API client for end-to-end tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tenants.services.provisioning import set_gateway


@pytest.fixture
def operator_client() -> APIClient:
    set_gateway(None)  # the real gRPC gateway
    from django.conf import settings

    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("op", is_staff=True))
    return client
