"""Sign-in throttling and CSRF protection of the console's forms."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client, override_settings

from tests.unit.console.conftest import Platform

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def _sign_in(client: Client, username: str, password: str, address: str = "10.0.0.1") -> int:
    response = client.post(
        "/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address
    )
    return int(response.status_code)


@override_settings(LOGIN_MAX_FAILURES=3, LOGIN_WINDOW_S=60)
def test_repeated_failures_lock_sign_in_even_with_the_right_password() -> None:
    get_user_model().objects.create_user("alice", password="correct horse")
    client = Client()
    assert [_sign_in(client, "alice", f"guess-{i}") for i in range(3)] == [200, 200, 200]
    # locked: the right password is refused too, with 429 and a one-line reason on the form
    locked = client.post("/accounts/login/", {"username": "alice", "password": "correct horse"})
    assert locked.status_code == 429
    assert b"Too many failed sign-ins" in locked.content
    assert "_auth_user_id" not in client.session
    # from another address the same username is still locked (counted per username too)
    assert _sign_in(Client(), "alice", "correct horse", address="10.0.0.2") == 429
    # when the window has passed, the right password works again
    cache.clear()
    assert _sign_in(client, "alice", "correct horse") == 302


@override_settings(LOGIN_MAX_FAILURES=3, LOGIN_WINDOW_S=60)
def test_one_address_cannot_spray_many_usernames() -> None:
    get_user_model().objects.create_user("bob", password="s3cret-pass")
    client = Client()
    assert [_sign_in(client, f"user{i}", "x") for i in range(3)] == [200, 200, 200]
    assert _sign_in(client, "bob", "s3cret-pass") == 429
    assert _sign_in(Client(), "bob", "s3cret-pass", address="10.0.0.9") == 302  # bob elsewhere


def test_a_successful_sign_in_is_not_counted() -> None:
    get_user_model().objects.create_user("carol", password="pw-carol-123")
    for _ in range(10):
        assert _sign_in(Client(), "carol", "pw-carol-123") == 302


def test_console_forms_refuse_a_post_without_the_csrf_token(platform: Platform) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(platform.users["owner"])
    url = f"/t/{platform.tenant.namespace}/topics/new/"
    page = client.get(url)
    assert page.status_code == 200 and b"csrfmiddlewaretoken" in page.content
    forged = client.post(url, {"name": "from-elsewhere", "queue_count": 4})
    assert forged.status_code == 403
    assert not platform.tenant.topics.filter(name="from-elsewhere").exists()
    # the sign-in form is protected the same way
    assert Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "x"}).status_code == 403
