"""Schemathesis against /api/schema/: no request the schema allows may produce a 5xx."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def api_schema(django_db_setup: Any, django_db_blocker: Any) -> Any:
    from pathlib import Path

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.wsgi import get_wsgi_application
    from rest_framework.authtoken.models import Token

    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    with django_db_blocker.unblock():
        user, _ = get_user_model().objects.get_or_create(username="fuzz-op", defaults={"is_staff": True})
        token, _ = Token.objects.get_or_create(user=user)
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    schema.config.headers = {"Authorization": f"Token {token.key}"}  # type: ignore[attr-defined]
    return schema


@pytest.mark.django_db(transaction=True)
def test_no_server_errors(api_schema: Any) -> None:
    from hypothesis import HealthCheck, given, settings

    failures: list[str] = []
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            response = case.call(headers={"Authorization": api_schema.config.headers["Authorization"]})
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.status_code}")

        run()
    assert not failures, failures
