"""More of the console in headless Chromium against the live stack: a consumer group created in
the browser whose dead letter is re-driven from the DLQ page (and audited), an alert rule form, the
operators' broker group page, and the main pages at a phone's width."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mqcloud import ClientConfig, Credentials, Message, Producer, SimpleConsumer

from .conftest import Stack, screenshot, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}


def expect() -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


def nav(page: Any, name: str) -> None:
    page.get_by_role("navigation", name="Console").get_by_role("link", name=name, exact=True).click()


def _create_topic(page: Any, name: str) -> None:
    page.goto("/t/acme/topics/new/")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Queue count").fill("1")
    page.get_by_role("button", name="Create topic").click()
    expect()(page).to_have_url(re.compile(rf"/t/acme/topics/{name}/$"))
    expect()(page.locator("h1 .badge")).to_have_text("Active")


def test_create_group_and_redrive_a_dead_letter(page: Any, stack: Stack) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"refunds-{suffix}", f"refunds-worker-{suffix}"
    sign_in(page, "olivia")
    _create_topic(page, topic)

    # when: a consumer group that gives up after one delivery is created in the browser
    nav(page, "Consumer groups")
    page.locator("#new-group").click()
    page.get_by_label("Name").fill(group)
    page.get_by_label("Max delivery attempts").fill("1")
    page.get_by_role("button", name="Create consumer group").click()
    # then: its page, provisioned onto the broker
    expect()(page).to_have_url(re.compile(rf"/t/acme/groups/{group}/$"))
    expect()(page.locator("h1 .badge")).to_have_text("Active")
    nav(page, "Consumer groups")
    expect()(page.locator("#group-rows")).to_contain_text(group)

    # given: a message the group's consumer fails to process (never acks it)
    config = ClientConfig(
        stack.broker.target, credentials=Credentials(stack.access_key, stack.secret_key), namespace="acme"
    )
    with Producer(config, topics=[topic]) as producer:
        receipt = producer.send(Message(topic, b'{"refund": 7}', tag="refund"))
    with SimpleConsumer(config, group, {topic: "*"}, await_duration=2) as consumer:
        got = []
        for _ in range(5):
            got = consumer.receive(1, 1)
            if got:
                break
        assert [m.message_id for m in got] == [receipt.message_id]
        time.sleep(1.5)  # its only attempt runs out: the next receive dead-letters it
        assert consumer.receive(1, 1) == []

        # when: the owner re-drives it from the DLQ page
        page.goto(f"/t/acme/groups/{group}/")
        page.get_by_role("link", name="Dead letters").click()
        expect()(page.locator("#dlq-form tbody")).to_contain_text(receipt.message_id)
        screenshot(page, "dlq")
        page.get_by_label(f"Select {receipt.message_id}").check()
        page.locator("#redrive-selected").click()
        # then: it is gone from the DLQ, and the consumer gets it again
        expect()(page.locator(".messages")).to_contain_text(
            f"1 dead letter(s) sent back to their topic for {group}"
        )
        expect()(page.locator("#dlq-form tbody")).to_contain_text("No dead letters.")
        again = []
        for _ in range(5):
            again = consumer.receive(1, 30)
            if again:
                break
        assert [m.message_id for m in again] == [receipt.message_id]
        consumer.ack(again[0])

    # and the audit log records the re-drive, with who did it and which message
    nav(page, "Audit log")
    row = page.locator("#audit-rows tr").filter(has_text=group).filter(has_text="Update").first
    expect()(row).to_contain_text("olivia")
    row.locator("summary").click()
    expect()(row.locator("pre")).to_contain_text("redrive")
    expect()(row.locator("pre")).to_contain_text(receipt.message_id)


def test_alert_rule_form_keeps_input_and_lists_the_rule(page: Any) -> None:
    sign_in(page, "olivia")
    nav(page, "Alert rules")
    page.locator("#new-alert").click()
    name = f"billing behind {uuid.uuid4().hex[:4]}"
    page.get_by_label("Name").fill(name)
    page.get_by_label("Consumer group").select_option(label="billing")
    page.get_by_label("Channel").select_option("webhook")
    page.get_by_label("Webhook URL").fill("https://hooks.example.com/mq")
    page.get_by_role("button", name="Create alert rule").click()
    # no threshold: the reason on the threshold fields, what was typed kept
    expect()(page.locator(".field.invalid .errorlist").first).to_contain_text("Set a lag threshold")
    expect()(page.get_by_label("Name")).to_have_value(name)
    expect()(page.get_by_label("Webhook URL")).to_have_value("https://hooks.example.com/mq")
    page.get_by_label("Lag threshold (messages)").fill("1000")
    page.get_by_role("button", name="Create alert rule").click()
    # a webhook rule: its signing secret comes next, for the receiver to verify calls with
    expect()(page).to_have_url(re.compile(r"/t/acme/alerts/\d+/secret/$"))
    expect()(page.locator("#signing-secret")).to_have_text(re.compile(r"^whsec_[A-Za-z0-9_-]{43}$"))
    page.locator("#secret-done").click()
    expect()(page).to_have_url(re.compile(r"/t/acme/alerts/$"))
    row = page.locator("#alert-rules tbody tr").filter(has_text=name)
    expect()(row).to_contain_text("lag ≥ 1000")
    expect()(row).to_contain_text("not checked yet")
    screenshot(page, "alerts")


def test_operator_sees_ha_and_tier_state_of_a_broker_group(page: Any) -> None:
    sign_in(page, "ops")
    nav(page, "Clusters & brokers")
    page.locator("table").filter(has_text="Broker groups").get_by_role("link", name="local-a").click()
    expect()(page.locator("h1")).to_contain_text("local-a")
    expect()(page.locator("#ha-state")).to_contain_text("STANDALONE")
    expect()(page.locator("#ha-state")).to_contain_text("healthy")
    expect()(page.locator("#tier-state")).to_contain_text("Tiered storage is off on this node")
    screenshot(page, "broker-group")


@pytest.fixture
def phone(browser: Any, stack: Stack) -> Iterator[Any]:
    context = browser.new_context(viewport=PHONE, base_url=stack.url, is_mobile=True, has_touch=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


# The elements that stick out past the right edge (for the failure message).
WIDEST = """Array.from(document.querySelectorAll("body *")).filter(e => {
    if (e.getBoundingClientRect().right <= screen.width + 1) return false;
    if (["absolute", "fixed"].includes(getComputedStyle(e).position)) return true;
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== "visible") return false;  // scrolls inside its box
    }
    return true;
  }).slice(0, 6).map(e => e.tagName + "." + e.className + "#" + e.id + " " +
    getComputedStyle(e).position + " " + Math.round(e.getBoundingClientRect().right))"""

PHONE_PAGES = (
    "/t/acme/",
    "/t/acme/topics/",
    "/t/acme/topics/orders/",
    "/t/acme/topics/orders/messages/",
    "/t/acme/groups/",
    "/t/acme/groups/billing/",
    "/t/acme/groups/billing/dlq/",
    "/t/acme/alerts/",
    "/t/acme/keys/",
    "/t/acme/acls/",
    "/t/acme/quotas/",
    "/t/acme/billing/",
    "/t/acme/audit/",
)


def _fits(phone: Any, paths: tuple[str, ...]) -> None:
    for path in paths:
        phone.goto(path)
        phone.wait_for_load_state("networkidle")
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{path} is {width}px wide: {phone.evaluate(WIDEST)}"
        expect()(phone.locator("h1").first).to_be_visible()


def test_phone_width_operator_pages_fit(phone: Any) -> None:
    sign_in(phone, "ops")
    _fits(phone, ("/platform/", "/platform/tenants/", "/platform/plans/", "/platform/brokers/"))
    # the broker group page, reached from the platform overview's node list
    phone.goto("/platform/")
    phone.locator("table").filter(has_text="Broker nodes").get_by_role("link", name="local-a").first.tap()
    expect()(phone.locator("#ha-state")).to_contain_text("STANDALONE")
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"broker group page is {width}px wide: {phone.evaluate(WIDEST)}"


def test_phone_width_pages_fit_and_nav_works(phone: Any) -> None:
    sign_in(phone, "olivia")
    _fits(phone, PHONE_PAGES)
    phone.goto("/t/acme/")
    expect()(phone.locator("#storage-used")).to_be_visible()
    expect()(phone.locator("#overview-lag table")).to_be_visible()
    screenshot(phone, "phone-overview")
    # the sidebar is a strip that scrolls sideways: a link past the edge scrolls into view and works
    link = phone.get_by_role("navigation", name="Console").get_by_role(
        "link", name="Consumer groups", exact=True
    )
    link.scroll_into_view_if_needed()
    box = link.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    link.tap()
    expect()(phone).to_have_url(re.compile(r"/t/acme/groups/$"))
    expect()(phone.locator("#group-rows")).to_contain_text("billing")
    # the tenant switcher is usable too
    phone.locator("#switch-tenant").select_option("beta")
    expect()(phone).to_have_url(re.compile(r"/t/beta/groups/$"))
