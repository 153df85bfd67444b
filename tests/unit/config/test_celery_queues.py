"""The nightly Spark jobs go to a Celery queue of their own; every other task to the default one."""

from __future__ import annotations

from django.conf import settings

from config.celery import app


def test_only_the_analytics_jobs_go_to_the_analytics_queue() -> None:
    # given: every task the control plane registers
    app.loader.import_default_modules()
    names = [name for name in app.tasks if name.startswith("tenants.")]
    assert "tenants.run_analytics_job" in names and "tenants.reconcile_brokers" in names
    # when: the router picks each one's queue
    queues = {name: app.amqp.router.route({}, name)["queue"].name for name in names}
    # then: the analytics jobs alone leave the default queue, which provisioning and reconcile share
    assert queues.pop("tenants.run_analytics_job") == settings.MQ_ANALYTICS_QUEUE == "analytics"
    assert set(queues.values()) == {settings.CELERY_TASK_DEFAULT_QUEUE}
