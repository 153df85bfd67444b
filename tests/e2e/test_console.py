"""The console in headless Chromium against a live control plane and a real broker."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from mqcloud import ClientConfig, Credentials, Message, Producer, SimpleConsumer

from .conftest import Stack, csrf_post, screenshot, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def expect() -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


def nav(page: Any, name: str) -> None:
    page.get_by_role("navigation", name="Console").get_by_role("link", name=name, exact=True).click()


def test_sign_in_switch_tenant_and_create_topic(page: Any) -> None:
    # given: an owner of two tenants signs in
    sign_in(page, "olivia")
    expect()(page).to_have_url(re.compile(r"/t/acme/$"))
    expect()(page.locator("#role")).to_have_text("owner")
    # the storage card and the lag panel load from the brokers (metrics endpoint, admin API)
    expect()(page.locator("#storage-stat")).to_contain_text("of 10.0 GiB")
    expect()(page.locator("#storage-used")).to_have_text(re.compile(r"^\d+(\.\d)? (B|KiB|MiB)$"))
    expect()(page.locator("#overview-lag table")).to_be_visible()
    screenshot(page, "overview")

    # when: the switcher moves to the other tenant while on the topics page
    nav(page, "Topics")
    page.locator("#switch-tenant").select_option("beta")
    # then: the same page of the other tenant
    expect()(page).to_have_url(re.compile(r"/t/beta/topics/$"))
    page.locator("#switch-tenant").select_option("acme")
    expect()(page).to_have_url(re.compile(r"/t/acme/topics/$"))

    # when: a topic with an invalid name is submitted
    page.locator("#new-topic").click()
    page.get_by_label("Name").fill("not valid!")
    page.get_by_label("Description").fill("payment events")
    page.get_by_label("Queue count").fill("4")
    page.get_by_role("button", name="Create topic").click()
    # then: the error is shown and what was typed is kept
    expect()(page.locator(".field.invalid .errorlist")).to_contain_text("letters, digits")
    expect()(page.get_by_label("Description")).to_have_value("payment events")

    # when: the name is fixed
    page.get_by_label("Name").fill("payments")
    page.get_by_role("button", name="Create topic").click()
    # then: the topic exists, provisioned onto the broker (eager Celery), with its queues
    expect()(page).to_have_url(re.compile(r"/t/acme/topics/payments/$"))
    expect()(page.locator("h1 .badge")).to_have_text("Active")
    expect()(page.locator("#topic-live")).to_contain_text("Queues")
    screenshot(page, "topic-detail")

    # and the list's live search finds it without a page load
    nav(page, "Topics")
    page.get_by_label("Search topics").fill("paym")
    expect()(page.locator("#topic-rows tr")).to_have_count(1)
    expect()(page.locator("#topic-rows")).to_contain_text("payments")
    screenshot(page, "topics")


def test_viewer_sees_no_write_controls_and_is_refused(page: Any) -> None:
    sign_in(page, "victor")
    expect()(page.locator("#role")).to_have_text("viewer")
    expect()(page.locator("#read-only-note")).to_be_visible()
    nav(page, "Topics")
    expect()(page.locator("#topic-rows")).to_contain_text("orders")
    # no create button, no edit/delete links
    expect()(page.locator("#new-topic")).to_have_count(0)
    expect()(page.get_by_role("link", name=re.compile("^Delete"))).to_have_count(0)
    # a hand-made POST and the delete page are refused
    response = csrf_post(
        page,
        "/t/acme/topics/new/",
        {
            "name": "sneaky",
            "message_type": "NORMAL",
            "queue_count": "1",
            "retention_hours": "1",
            "tiered_retention_hours": "0",
            "max_message_bytes": "1024",
        },
    )
    assert response.status == 403
    assert page.goto("/t/acme/topics/orders/delete/").status == 403
    assert page.goto("/platform/").status == 403
    page.goto("/t/acme/topics/")
    expect()(page.locator("#topic-rows")).not_to_contain_text("sneaky")


def test_operator_sees_platform_pages(page: Any, stack: Stack) -> None:
    sign_in(page, "ops")
    expect()(page.locator("#platform-nav")).to_be_visible()
    nav(page, "Clusters & brokers")
    expect()(page.locator("table").filter(has_text="Broker nodes")).to_contain_text(stack.broker.target)
    expect()(page.locator("table").filter(has_text="Broker nodes")).to_contain_text("Healthy")
    screenshot(page, "platform-brokers")
    nav(page, "Tenants")
    expect()(page.locator("#tenant-rows")).to_contain_text("acme")
    expect()(page.locator("#tenant-rows")).to_contain_text("beta")


def test_browse_a_message_sent_by_the_sdk_and_watch_lag_drop(page: Any, stack: Stack) -> None:
    # given: messages sent by the SDK to the real broker
    config = ClientConfig(
        stack.broker.target, credentials=Credentials(stack.access_key, stack.secret_key), namespace="acme"
    )
    key = f"order-{uuid.uuid4().hex[:8]}"
    with Producer(config, topics=["orders"]) as producer:
        receipt = producer.send(Message("orders", b'{"order": 42, "total": 9.5}', tag="created", keys=[key]))
        producer.send(Message("orders", b"second", tag="created"))
    # when: the owner looks the message up by key
    sign_in(page, "olivia")
    page.goto("/t/acme/topics/orders/messages/")
    page.get_by_label("Message key").check()
    page.get_by_label("Key", exact=True).fill(key)
    page.get_by_role("button", name="Search").click()
    # then: one result, and its detail shows the body, pretty JSON, hex and the trace
    results = page.locator("#message-results tbody tr")
    expect()(results).to_have_count(1)
    results.get_by_role("link").click()
    expect()(page.locator("h1")).to_contain_text(receipt.message_id)
    expect()(page.locator("#message-body")).to_have_text('{"order": 42, "total": 9.5}')
    page.get_by_role("link", name="JSON").click()
    expect()(page.locator("#message-body")).to_contain_text('  "order": 42,')
    page.get_by_role("link", name="Hex").click()
    expect()(page.locator("#message-body")).to_contain_text("00000000  7b 22 6f 72")
    expect()(page.locator("#message-trace")).to_contain_text("stored")
    screenshot(page, "message")

    # when: a test message is sent from the console
    page.goto("/t/acme/topics/orders/send/")
    page.get_by_label("Body").fill("hello from the console")
    page.get_by_label("Tag").fill("manual")
    page.get_by_role("button", name="Send message").click()
    expect()(page.locator("#sent")).to_contain_text("Sent: message")

    # when: a consumer of "billing" takes every message
    with SimpleConsumer(config, "billing", {"orders": "*"}, await_duration=2) as consumer:
        seen = 0
        for _ in range(10):
            batch = consumer.receive(16, 30)
            for message in batch:
                consumer.ack(message)
            seen += len(batch)
            if seen >= 3:
                break
    assert seen >= 3
    # then: the group page shows its lag at 0
    page.goto("/t/acme/groups/billing/")
    expect()(page.locator("#total-lag")).to_have_text("0", timeout=20_000)

    # when: two more messages wait while beat samples the lag, then are consumed and it samples again
    with Producer(config, topics=["orders"]) as producer:
        for i in range(2):
            producer.send(Message("orders", b"later %d" % i, tag="created"))
    stack.run_task("sample_group_lag_task")
    with SimpleConsumer(config, "billing", {"orders": "*"}, await_duration=2) as consumer:
        seen = 0
        for _ in range(10):
            batch = consumer.receive(16, 30)
            for message in batch:
                consumer.ack(message)
            seen += len(batch)
            if seen >= 2:
                break
    stack.run_task("sample_group_lag_task")
    # then: the stored lag history has both samples, 2 then 0, in the chart's table
    page.goto("/t/acme/groups/billing/")
    lags = [int(t) for t in page.locator("#lag-history-table tbody tr td:nth-child(2)").all_text_contents()]
    assert lags[-2:] == [2, 0], lags
    expect()(page.locator("#group-lag-history")).to_be_visible()
    expect()(page.locator("#total-lag")).to_have_text("0", timeout=20_000)
    screenshot(page, "group")
