"""The console's alert rule pages: list, create/edit/delete with validation that keeps what was
typed, roles (viewers read only), and the audit trail of every change."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tenants.choices import MembershipRole, ProvisioningStatus
from tenants.models import AlertRule, AuditEvent, ConsumerGroup, Membership, Tenant

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def acme() -> dict[str, Any]:
    """Tenant acme with an active group, a developer and a viewer; another tenant's group."""
    users = get_user_model().objects
    acme = Tenant.objects.create(name="Acme", namespace="acme")
    other = Tenant.objects.create(name="Other", namespace="other")
    billing = ConsumerGroup.objects.create(tenant=acme, name="billing", status=ProvisioningStatus.ACTIVE)
    foreign = ConsumerGroup.objects.create(tenant=other, name="theirs", status=ProvisioningStatus.ACTIVE)
    clients = {}
    for name, role in (("dana", MembershipRole.DEVELOPER), ("vic", MembershipRole.VIEWER)):
        user = users.create_user(name)
        Membership.objects.create(user=user, tenant=acme, role=role)
        clients[name] = Client()
        clients[name].force_login(user)
    return {"tenant": acme, "group": billing, "foreign": foreign, **clients}


def test_create_keeps_input_on_error_then_edit_and_delete(acme: dict[str, Any]) -> None:
    dev: Client = acme["dana"]
    group: ConsumerGroup = acme["group"]
    # the group page offers a rule for this group, preselected on the form
    assert f'/t/acme/alerts/new/?group={group.pk}"' in dev.get("/t/acme/groups/billing/").content.decode()
    form = dev.get(f"/t/acme/alerts/new/?group={group.pk}").content.decode()
    assert re.search(rf'<option value="{group.pk}" selected>billing</option>', form)
    assert "theirs" not in form
    assert 'id="add-alert"' not in acme["vic"].get("/t/acme/groups/billing/").content.decode()

    # when: no threshold and a webhook without its URL
    bad = {"name": "slow billing", "group": str(group.pk), "channel": "webhook", "email": "", "enabled": "on"}
    response = dev.post("/t/acme/alerts/new/", bad)
    # then: 400, the errors on their fields, and the typed name kept
    assert response.status_code == 400
    html = response.content.decode()
    assert "Set a lag threshold, a dead-letter threshold, or both." in html
    assert "A webhook alert needs a URL." in html
    assert 'value="slow billing"' in html
    assert not AlertRule.objects.exists()

    # a group of another tenant is not a choice
    foreign = {
        **bad,
        "group": str(acme["foreign"].pk),
        "lag_threshold": "10",
        "webhook_url": "https://h.example/x",
    }
    assert dev.post("/t/acme/alerts/new/", foreign).status_code == 400

    # when: fixed
    good = {**bad, "lag_threshold": "100", "webhook_url": "https://hooks.example.com/mq"}
    response = dev.post("/t/acme/alerts/new/", good)
    rule = AlertRule.objects.get()
    # a webhook rule's next stop is its signing secret, which the receiver needs
    assert response.status_code == 302 and response["Location"] == f"/t/acme/alerts/{rule.pk}/secret/"
    assert (rule.tenant, rule.group, rule.lag_threshold, rule.target) == (
        acme["tenant"],
        group,
        100,
        "https://hooks.example.com/mq",
    )
    listing = dev.get("/t/acme/alerts/").content.decode()
    assert "slow billing" in listing and "lag ≥ 100" in listing and 'id="new-alert"' in listing

    # a duplicate name is refused on the name field, input kept
    dup = dev.post("/t/acme/alerts/new/", {**good, "lag_threshold": "7"})
    assert dup.status_code == 400 and "An alert rule with this name exists" in dup.content.decode()
    assert 'value="7"' in dup.content.decode()

    # edit: switch to e-mail on dead letters; the webhook URL is dropped
    edit = {
        "name": "slow billing",
        "group": str(group.pk),
        "dlq_threshold": "5",
        "channel": "email",
        "email": "oncall@example.com",
        "enabled": "on",
    }
    assert dev.post(f"/t/acme/alerts/{rule.pk}/edit/", edit).status_code == 302
    rule.refresh_from_db()
    assert (rule.lag_threshold, rule.dlq_threshold, rule.email, rule.webhook_url) == (
        None,
        5,
        "oncall@example.com",
        "",
    )

    # delete
    assert dev.post(f"/t/acme/alerts/{rule.pk}/delete/").status_code == 302
    assert not AlertRule.objects.exists()
    actions = list(AuditEvent.objects.filter(object_type="alertrule").values_list("action", flat=True))
    assert sorted(actions) == ["create", "delete", "update"]


def test_viewer_reads_but_cannot_change(acme: dict[str, Any]) -> None:
    rule = AlertRule.objects.create(
        tenant=acme["tenant"], group=acme["group"], name="watch", dlq_threshold=1, email="a@example.com"
    )
    viewer: Client = acme["vic"]
    page = viewer.get("/t/acme/alerts/")
    html = page.content.decode()
    assert page.status_code == 200 and "watch" in html
    assert 'id="new-alert"' not in html and f"/alerts/{rule.pk}/delete/" not in html
    assert viewer.get("/t/acme/alerts/new/").status_code == 403
    assert viewer.post(f"/t/acme/alerts/{rule.pk}/delete/").status_code == 403
    assert viewer.post(f"/t/acme/alerts/{rule.pk}/edit/", {"name": "x"}).status_code == 403
    assert AlertRule.objects.filter(pk=rule.pk, name="watch").exists()
    # another tenant's rule does not exist for acme's members
    other_rule = AlertRule.objects.create(
        tenant=acme["foreign"].tenant,
        group=acme["foreign"],
        name="theirs",
        lag_threshold=1,
        email="b@example.com",
    )
    assert acme["dana"].get(f"/t/acme/alerts/{other_rule.pk}/edit/").status_code == 404


def test_mail_and_webhook_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from config.env import PlatformSettings

    for name, value in {
        "MQ_EMAIL_HOST": "smtp.example.com",
        "MQ_EMAIL_PORT": "587",
        "MQ_EMAIL_USER": "alerts",
        "MQ_EMAIL_PASSWORD": "s3cret",
        "MQ_EMAIL_USE_TLS": "true",
        "MQ_EMAIL_FROM": "MQ <mq@example.com>",
        "MQ_ALERT_WEBHOOK_ALLOW_PRIVATE": "1",
    }.items():
        monkeypatch.setenv(name, value)
    env = PlatformSettings()
    assert (env.email_host, env.email_port, env.email_user, env.email_use_tls, env.email_from) == (
        "smtp.example.com",
        587,
        "alerts",
        True,
        "MQ <mq@example.com>",
    )
    assert env.email_password is not None and env.email_password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(env) and env.alert_webhook_allow_private


def test_send_a_test_notification(acme: dict[str, Any], settings: Any) -> None:
    from django.core import mail
    from django.core.cache import cache

    from tenants.models import AlertEvent
    from tests.integration.control_plane.test_alerts_e2e import Webhook

    cache.clear()
    settings.MQ_ALERT_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on loopback
    hook = Webhook()
    try:
        by_webhook = AlertRule.objects.create(
            tenant=acme["tenant"],
            group=acme["group"],
            name="hook",
            lag_threshold=50,
            channel="webhook",
            webhook_url=hook.url,
        )
        by_email = AlertRule.objects.create(
            tenant=acme["tenant"],
            group=acme["group"],
            name="mail",
            dlq_threshold=3,
            email="oncall@example.com",
        )
        dev: Client = acme["dana"]
        # when: the developer presses "Test" on each rule
        page = dev.post(f"/t/acme/alerts/{by_webhook.pk}/test/", follow=True).content.decode()
        assert f"A test notification of hook was sent to {hook.url}." in page
        dev.post(f"/t/acme/alerts/{by_email.pk}/test/")
        # then: the webhook got a payload marked as a test, the address a "[test]" e-mail
        [call] = hook.received
        assert call["test"] is True and call["rule"] == "hook" and call["threshold"] == 50
        [email] = mail.outbox
        assert email.to == ["oncall@example.com"] and email.subject.startswith(
            "[MQCloud] [test] acme/billing"
        )
        # a second press within the minute is refused; nothing is recorded as a fired alert
        again = dev.post(f"/t/acme/alerts/{by_webhook.pk}/test/", follow=True).content.decode()
        assert "was not delivered" in again and len(hook.received) == 1
        assert not AlertEvent.objects.exists()
        # viewers cannot send one; a GET does nothing
        assert acme["vic"].post(f"/t/acme/alerts/{by_email.pk}/test/").status_code == 403
        assert dev.get(f"/t/acme/alerts/{by_email.pk}/test/").status_code == 405
        assert len(mail.outbox) == 1
    finally:
        hook.close()


def _secret_on(html: str) -> str:
    found = re.search(r'id="signing-secret">([^<]+)<', html)
    assert found, html[:2000]
    return found.group(1)


def test_webhook_calls_are_signed_with_the_rules_secret(acme: dict[str, Any], settings: Any) -> None:
    from django.core.cache import cache

    from tests.integration.control_plane.test_alerts_e2e import Webhook, signed_by

    cache.clear()
    settings.MQ_ALERT_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on loopback
    dev: Client = acme["dana"]
    hook = Webhook()
    try:
        # given: a developer creates a webhook rule; the secret page comes next, not cached
        form = {
            "name": "signed",
            "group": str(acme["group"].pk),
            "lag_threshold": "5",
            "channel": "webhook",
            "webhook_url": hook.url,
            "enabled": "on",
        }
        page = dev.post("/t/acme/alerts/new/", form, follow=True)
        rule = AlertRule.objects.get(name="signed")
        assert page.redirect_chain[-1][0] == f"/t/acme/alerts/{rule.pk}/secret/"
        assert page["Cache-Control"] == "no-store"
        secret = _secret_on(page.content.decode())
        assert (
            secret.startswith("whsec_")
            and _secret_on(dev.get(f"/t/acme/alerts/{rule.pk}/secret/").content.decode()) == secret
        )
        # viewers read the rule, never its secret; the list offers the secret only to writers
        assert acme["vic"].get(f"/t/acme/alerts/{rule.pk}/secret/").status_code == 403
        assert f"/alerts/{rule.pk}/secret/" not in acme["vic"].get("/t/acme/alerts/").content.decode()
        assert f"/alerts/{rule.pk}/secret/" in dev.get("/t/acme/alerts/").content.decode()
        # nor is the secret anywhere in the audit log
        assert secret not in str(list(AuditEvent.objects.values_list("before", "after")))

        # when: the developer sends a test notification
        dev.post(f"/t/acme/alerts/{rule.pk}/test/")
        # then: the receiver recomputes the HMAC of the raw body with the secret, and it matches
        [(body, headers)] = hook.raw
        assert headers["x-mqcloud-signature"].startswith("sha256=") and signed_by(secret, body, headers)

        # when: the secret is rotated (confirmed; a GET only asks)
        assert (
            "Rotate the signing secret"
            in dev.get(f"/t/acme/alerts/{rule.pk}/secret/rotate/").content.decode()
        )
        assert acme["vic"].post(f"/t/acme/alerts/{rule.pk}/secret/rotate/").status_code == 403
        rotated = dev.post(f"/t/acme/alerts/{rule.pk}/secret/rotate/")
        new = _secret_on(rotated.content.decode())
        assert new != secret and rotated["Cache-Control"] == "no-store"
        assert AuditEvent.objects.filter(object_type="alertrule", action="rotate").count() == 1
        cache.clear()  # the test button's once-a-minute limit
        dev.post(f"/t/acme/alerts/{rule.pk}/test/")
        # then: the next call is signed with the new secret only
        body, headers = hook.raw[1]
        assert signed_by(new, body, headers) and not signed_by(secret, body, headers)

        # a secret encrypted under a key this deployment no longer has: the page says so, offers rotation
        from cryptography.fernet import Fernet

        foreign = Fernet(Fernet.generate_key()).encrypt(b"whsec_elsewhere")
        AlertRule.objects.filter(pk=rule.pk).update(signing_secret_encrypted=foreign)
        stuck = dev.get(f"/t/acme/alerts/{rule.pk}/secret/")
        assert stuck.status_code == 409 and "rotate it" in stuck.content.decode()
        assert 'id="signing-secret"' not in stuck.content.decode()
        assert _secret_on(dev.post(f"/t/acme/alerts/{rule.pk}/secret/rotate/").content.decode())
    finally:
        hook.close()
