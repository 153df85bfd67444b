"""Billing units and the layout of inputs and outputs: plain Python, shared by the jobs and the checks."""

from __future__ import annotations

from typing import NamedTuple

__all__ = (
    "BILLING_ITEMS",
    "GB",
    "HOURS_PER_MONTH",
    "JOBS",
    "BillingItem",
)

# Billing GB is 2^30 bytes (as most clouds bill); a GB-month is 730 hours (8760 / 12).
GB = 1024**3
HOURS_PER_MONTH = 730
JOBS = ("billing", "lag")


class BillingItem(NamedTuple):
    """One priced quantity of a tenant-day.

    amount = quantity_raw x price / price_divisor, kept in micro-units rounded half up;
    the shown quantity is quantity_raw / quantity_divisor.
    """

    item: str
    usage_column: str
    unit: str
    price_column: str
    price_unit: str
    price_divisor: int
    quantity_divisor: int


BILLING_ITEMS = (
    BillingItem(
        "requests_in", "requests_in_4k", "request", "price_per_million_requests",
        "per million 4 KiB requests", 10**6, 1,
    ),
    BillingItem(
        "requests_out", "requests_out_4k", "request", "price_per_million_requests",
        "per million 4 KiB requests", 10**6, 1,
    ),
    BillingItem("transfer_in", "bytes_in", "GB", "price_per_gb_in", "per GB", GB, GB),
    BillingItem("transfer_out", "bytes_out", "GB", "price_per_gb_out", "per GB", GB, GB),
    BillingItem(
        "storage", "storage_byte_hours", "GB-hour", "price_per_gb_month",
        "per GB-month (730 h)", GB * HOURS_PER_MONTH, GB,
    ),
    BillingItem("topics", "topic_days", "topic-day", "price_per_topic_day", "per topic-day", 1, 1),
)  # fmt: skip
