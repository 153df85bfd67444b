"""The nightly Spark jobs run on a Celery worker of their own in ``mqctl standalone``: a topic created
while one runs is provisioned at once instead of waiting for Spark (docs/operations.md, "Celery queues").
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.cli.conftest import Mqctl, Stack

pytestmark = pytest.mark.slow

JOB_TIMEOUT_S = 300.0
Runs = list[dict[str, Any]]


def _billing_runs(operator: Mqctl) -> Runs:
    """The billing runs of yesterday (the day a nightly run computes) that the schedule started."""
    yesterday = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)).isoformat()
    runs = operator.json("analytics", "jobs", "--job", "billing", "--limit", "50")
    return [run for run in runs if run["date"] == yesterday and run["trigger"] == "schedule"]


def _wait_for(what: str, check: Callable[[], Runs], timeout: float) -> Runs:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout:.0f} s")


def test_a_topic_is_provisioned_while_a_nightly_job_runs(stack: Stack, operator: Mqctl, tenant: str) -> None:
    # given: a billing job queued as beat queues it at night, and running in Spark
    code = "from tenants.tasks import run_analytics_job_task as t; t.delay('billing', trigger='schedule')"
    stack.manage("shell", "-c", code)
    running = _wait_for(
        "running billing job", lambda: [r for r in _billing_runs(operator) if r["status"] == "running"], 120
    )
    # when: a tenant creates a topic meanwhile (mqctl waits until the brokers serve it)
    started = time.monotonic()
    topic = operator.json("topic", "create", f"orders-{uuid.uuid4().hex[:6]}", "--wait-timeout", "60")
    provisioned_s = time.monotonic() - started
    # then: it was provisioned while the job still ran: the job holds only its own worker
    assert topic["status"] == "active"
    still = {r["id"]: r["status"] for r in _billing_runs(operator)}
    assert still[running[0]["id"]] == "running", (still, provisioned_s)
    # and the job itself, on the analytics worker, runs to its end
    done = _wait_for(
        "finished billing job",
        lambda: [r for r in _billing_runs(operator) if r["status"] != "running"],
        JOB_TIMEOUT_S,
    )
    assert done[0]["status"] == "succeeded", done[0]["error"]
