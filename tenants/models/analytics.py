"""Results of the nightly analytics jobs (analytics/), loaded from their Parquet outputs.

Rows keep the tenant's namespace (and the group's name) next to a nullable foreign key, so billing
history survives the deletion of a tenant or group. The loader replaces a day's rows as a whole.
"""

from __future__ import annotations

from django.db import models

from tenants.choices import AnalyticsJob, JobRunStatus, JobTrigger
from tenants.models.tenants import Tenant
from tenants.models.topics import ConsumerGroup

__all__ = ("Invoice", "InvoiceLine", "JobRun", "LagDaily", "UsageDaily")


class JobRun(models.Model):
    """One run of a job for one day (plus the late days it re-ran); at most one running per job and day."""

    job = models.CharField(max_length=16, choices=AnalyticsJob.choices)
    date = models.DateField()
    status = models.CharField(max_length=16, choices=JobRunStatus.choices, default=JobRunStatus.RUNNING)
    trigger = models.CharField(max_length=16, choices=JobTrigger.choices, default=JobTrigger.MANUAL)
    attempt = models.PositiveIntegerField(default=1)
    master = models.CharField(max_length=200, blank=True)
    started = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    rows_in = models.BigIntegerField(default=0)
    rows_out = models.BigIntegerField(default=0)
    error = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True, help_text="The job's summary: every day it ran.")

    class Meta:
        ordering = ("-started", "-id")
        constraints = (
            models.UniqueConstraint(
                fields=("job", "date"),
                condition=models.Q(status="running"),
                name="%(app_label)s_%(class)s_one_running",
                violation_error_message="This job is already running for this day.",
            ),
        )

    def __str__(self) -> str:
        return f"{self.job} {self.date} {self.status}"


class UsageDaily(models.Model):
    """A tenant's metered usage for one UTC day."""

    tenant = models.ForeignKey(Tenant, on_delete=models.SET_NULL, null=True, related_name="usage_days")
    namespace = models.CharField(max_length=64)
    date = models.DateField()
    messages_in = models.BigIntegerField(default=0)
    messages_out = models.BigIntegerField(default=0)
    requests_in_4k = models.BigIntegerField(default=0)
    requests_out_4k = models.BigIntegerField(default=0)
    bytes_in = models.BigIntegerField(default=0)
    bytes_out = models.BigIntegerField(default=0)
    api_calls = models.BigIntegerField(default=0)
    storage_byte_hours = models.BigIntegerField(default=0)
    storage_gb_hours = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    topic_days = models.BigIntegerField(default=0)

    class Meta:
        ordering = ("-date", "namespace")
        constraints = (
            models.UniqueConstraint(fields=("namespace", "date"), name="%(app_label)s_%(class)s_unique_day"),
        )

    def __str__(self) -> str:
        return f"{self.namespace} {self.date}"


class Invoice(models.Model):
    """A tenant's invoice for one calendar month: the plan's fee plus every billed day so far."""

    tenant = models.ForeignKey(Tenant, on_delete=models.SET_NULL, null=True, related_name="invoices")
    namespace = models.CharField(max_length=64)
    period_start = models.DateField()
    period_end = models.DateField()
    plan = models.CharField(max_length=64)
    currency = models.CharField(max_length=3, default="USD")
    days_billed = models.PositiveIntegerField(default=0)
    base_amount = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    usage_amount = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    total = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    final = models.BooleanField(default=False, help_text="The month's last day has been billed.")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-period_start", "namespace")
        constraints = (
            models.UniqueConstraint(
                fields=("namespace", "period_start"), name="%(app_label)s_%(class)s_unique_month"
            ),
        )

    def __str__(self) -> str:
        return f"{self.namespace} {self.period_start:%Y-%m}"


class InvoiceLine(models.Model):
    """One priced item of one tenant-day (requests, transfer, storage, topics)."""

    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="lines", null=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.SET_NULL, null=True, related_name="invoice_lines")
    namespace = models.CharField(max_length=64)
    date = models.DateField()
    plan = models.CharField(max_length=64)
    item = models.CharField(max_length=32)
    quantity_raw = models.BigIntegerField(help_text="Requests, bytes, byte-hours or topic-days.")
    quantity = models.DecimalField(max_digits=24, decimal_places=6)
    unit = models.CharField(max_length=16)
    unit_price = models.DecimalField(max_digits=12, decimal_places=4)
    price_unit = models.CharField(max_length=64)
    amount = models.DecimalField(max_digits=20, decimal_places=6)
    currency = models.CharField(max_length=3, default="USD")

    class Meta:
        ordering = ("-date", "namespace", "item")
        constraints = (
            models.UniqueConstraint(
                fields=("namespace", "date", "item"), name="%(app_label)s_%(class)s_unique_item"
            ),
        )

    def __str__(self) -> str:
        return f"{self.namespace} {self.date} {self.item}"


class LagDaily(models.Model):
    """A consumer group's lag over one UTC day: percentiles, SLO minutes, stuck queues, trend."""

    tenant = models.ForeignKey(Tenant, on_delete=models.SET_NULL, null=True, related_name="lag_days")
    group = models.ForeignKey(ConsumerGroup, on_delete=models.SET_NULL, null=True, related_name="lag_days")
    namespace = models.CharField(max_length=64)
    group_name = models.CharField(max_length=100)
    date = models.DateField()
    minutes_sampled = models.PositiveIntegerField(default=0)
    p50_lag_messages = models.BigIntegerField(default=0)
    p95_lag_messages = models.BigIntegerField(default=0)
    max_lag_messages = models.BigIntegerField(default=0)
    p50_lag_ms = models.BigIntegerField(default=0)
    p95_lag_ms = models.BigIntegerField(default=0)
    max_lag_ms = models.BigIntegerField(default=0)
    lag_slo_messages = models.BigIntegerField(null=True, blank=True)
    lag_slo_seconds = models.BigIntegerField(null=True, blank=True)
    minutes_above_slo = models.PositiveIntegerField(null=True, blank=True, help_text="Null: no SLO set.")
    stuck_minutes = models.PositiveIntegerField(default=0)
    stuck_queues = models.PositiveIntegerField(default=0)
    prev_week_p95_lag_messages = models.FloatField(null=True, blank=True)
    prev_week_p95_lag_ms = models.FloatField(null=True, blank=True)
    trend_lag_messages_pct = models.FloatField(null=True, blank=True)
    trend_lag_ms_pct = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ("-date", "namespace", "group_name")
        constraints = (
            models.UniqueConstraint(
                fields=("namespace", "group_name", "date"), name="%(app_label)s_%(class)s_unique_day"
            ),
        )

    def __str__(self) -> str:
        return f"{self.namespace}/{self.group_name} {self.date}"
