"""Every schema the jobs read or write, declared once.

Inputs follow docs/metering.md (JSON Lines written by brokers) plus the two control-plane exports
(plan prices per tenant, consumer-group SLOs). Outputs are the Parquet tables the loader reads.
Money is never a float: prices travel as decimal strings and amounts as integer micro-units.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

__all__ = (
    "GROUPS_INPUT",
    "INVOICES",
    "INVOICE_LINES",
    "LAG_DAILY",
    "LAG_INPUT",
    "MONEY",
    "PRICES_INPUT",
    "QUANTITY",
    "USAGE_DAILY",
    "USAGE_INPUT",
)

# amounts keep six decimals (micro-units); invoice totals are rounded to cents
MONEY = DecimalType(20, 6)
QUANTITY = DecimalType(24, 6)
PRICE = DecimalType(12, 4)


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, kind, nullable=True) for name, kind in fields])


# The usage/ tree holds two kinds: "usage" (per broker, tenant and minute) and "storage" (hourly
# samples per topic). One schema covers both; ``kind`` tells them apart.
USAGE_INPUT = _struct(
    ("id", StringType()),
    ("kind", StringType()),
    ("minute", StringType()),
    ("ts", StringType()),
    ("broker", StringType()),
    ("tenant", StringType()),
    ("topic", StringType()),
    ("messages_in", LongType()),
    ("bytes_in", LongType()),
    ("messages_out", LongType()),
    ("bytes_out", LongType()),
    ("requests_in_4k", LongType()),
    ("requests_out_4k", LongType()),
    ("api_calls", MapType(StringType(), LongType())),
    ("bytes", LongType()),
    ("written_at", StringType()),
)

LAG_INPUT = _struct(
    ("id", StringType()),
    ("kind", StringType()),
    ("ts", StringType()),
    ("broker", StringType()),
    ("tenant", StringType()),
    ("group", StringType()),
    ("topic", StringType()),
    ("queue_id", IntegerType()),
    ("lag_messages", LongType()),
    ("lag_ms", LongType()),
    ("inflight", LongType()),
    ("committed_offset", LongType()),
    ("max_offset", LongType()),
    ("written_at", StringType()),
)

# Written by ``manage.py export_analytics_inputs``: one row per tenant with its plan's prices, plus
# tenant "*" carrying the default plan for namespaces the export does not know.
PRICES_INPUT = _struct(
    ("tenant", StringType()),
    ("plan", StringType()),
    ("currency", StringType()),
    ("price_monthly", StringType()),
    ("price_per_million_requests", StringType()),
    ("price_per_gb_in", StringType()),
    ("price_per_gb_out", StringType()),
    ("price_per_gb_month", StringType()),
    ("price_per_topic_day", StringType()),
)

GROUPS_INPUT = _struct(
    ("tenant", StringType()),
    ("group", StringType()),
    ("lag_slo_messages", LongType()),
    ("lag_slo_seconds", LongType()),
)

USAGE_DAILY = _struct(
    ("tenant", StringType()),
    ("messages_in", LongType()),
    ("messages_out", LongType()),
    ("requests_in_4k", LongType()),
    ("requests_out_4k", LongType()),
    ("bytes_in", LongType()),
    ("bytes_out", LongType()),
    ("api_calls", LongType()),
    ("storage_byte_hours", LongType()),
    ("storage_gb_hours", QUANTITY),
    ("topic_days", LongType()),
)

INVOICE_LINES = _struct(
    ("tenant", StringType()),
    ("plan", StringType()),
    ("item", StringType()),
    ("quantity_raw", LongType()),
    ("quantity", QUANTITY),
    ("unit", StringType()),
    ("unit_price", PRICE),
    ("price_unit", StringType()),
    ("amount_micros", LongType()),
    ("amount", MONEY),
    ("currency", StringType()),
)

INVOICES = _struct(
    ("tenant", StringType()),
    ("plan", StringType()),
    ("currency", StringType()),
    ("period_start", StringType()),
    ("period_end", StringType()),
    ("days_billed", IntegerType()),
    ("base_micros", LongType()),
    ("usage_micros", LongType()),
    ("total_micros", LongType()),
    ("total", DecimalType(14, 2)),
    ("final", BooleanType()),
)

LAG_DAILY = _struct(
    ("tenant", StringType()),
    ("group", StringType()),
    ("minutes_sampled", LongType()),
    ("p50_lag_messages", LongType()),
    ("p95_lag_messages", LongType()),
    ("max_lag_messages", LongType()),
    ("p50_lag_ms", LongType()),
    ("p95_lag_ms", LongType()),
    ("max_lag_ms", LongType()),
    ("lag_slo_messages", LongType()),
    ("lag_slo_seconds", LongType()),
    ("minutes_above_slo", LongType()),
    ("stuck_minutes", LongType()),
    ("stuck_queues", LongType()),
    ("prev_week_p95_lag_messages", DoubleType()),
    ("prev_week_p95_lag_ms", DoubleType()),
    ("trend_lag_messages_pct", DoubleType()),
    ("trend_lag_ms_pct", DoubleType()),
)
