"""Billing as pure DataFrame transformations: records -> usage per tenant-day -> priced lines -> invoices.

No I/O here: ``analytics.jobs`` reads the inputs and writes what these functions return.
Money is computed in integer micro-units with exact decimal arithmetic (half-up rounding once per
line), so every figure can be recomputed by hand or by ``analytics.reference``.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analytics.constants import BILLING_ITEMS, GB
from analytics.schemas import MONEY, QUANTITY

__all__ = (
    "dedupe",
    "invoice_lines",
    "monthly_invoices",
    "record_counts",
    "unpriced_tenants",
    "usage_daily",
)

_COUNTERS = ("messages_in", "messages_out", "requests_in_4k", "requests_out_4k", "bytes_in", "bytes_out")
_PRICE_COLUMNS = (
    "price_monthly",
    "price_per_million_requests",
    "price_per_gb_in",
    "price_per_gb_out",
    "price_per_gb_month",
    "price_per_topic_day",
)


def _int38(value: int | Column) -> Column:
    return (F.lit(value) if isinstance(value, int) else value).cast("decimal(38,0)")


def dedupe(records: DataFrame) -> DataFrame:
    """One record per id: the one written last (ties broken by content, so the pick is stable).

    Ids are scoped by tenant as well: lag ids do not include the tenant (docs/metering.md), and two
    tenants may name a group and topic alike. ``_copies`` counts the records each one stands for.
    """
    key = Window.partitionBy("tenant", "id")
    order = key.orderBy(
        F.to_timestamp("written_at").desc_nulls_last(),
        F.to_json(F.struct(*records.columns)).desc(),
    )
    return (
        records.withColumn("_n", F.row_number().over(order))
        .withColumn("_copies", F.count("*").over(key))
        .filter("_n = 1")
        .drop("_n")
    )


def record_counts(unique: DataFrame) -> tuple[int, int]:
    """(records read, records kept) of a de-duplicated frame, in one pass."""
    row = unique.agg(F.sum("_copies").alias("read"), F.count("*").alias("kept")).first()
    return (int(row["read"] or 0), int(row["kept"])) if row else (0, 0)


def usage_daily(records: DataFrame, day: str) -> DataFrame:
    """Per tenant: the day's counters, storage byte-hours and topic-days (schema ``USAGE_DAILY``).

    Storage: each (broker, topic) hour counts the last sample taken in that hour; hours without a
    sample are not billed. Topic-days: topics with at least one sample that day.
    """
    usage = records.filter((F.col("kind") == "usage") & (F.substring("minute", 1, 10) == day))
    counters = usage.groupBy("tenant").agg(
        *[F.sum(F.coalesce(F.col(c), F.lit(0))).cast("long").alias(c) for c in _COUNTERS],
        F.sum(
            F.aggregate(F.map_values(F.coalesce("api_calls", F.create_map())), F.lit(0).cast("long"), _add)
        ).alias("api_calls"),
    )
    samples = records.filter((F.col("kind") == "storage") & (F.substring("ts", 1, 10) == day))
    last_in_hour = Window.partitionBy("tenant", "broker", "topic", F.substring("ts", 12, 2)).orderBy(
        F.to_timestamp("ts").desc(), F.col("id").desc()
    )
    hourly = samples.withColumn("_n", F.row_number().over(last_in_hour)).filter("_n = 1")
    storage = hourly.groupBy("tenant").agg(
        F.sum(F.coalesce("bytes", F.lit(0))).cast("long").alias("storage_byte_hours"),
        F.countDistinct("topic").cast("long").alias("topic_days"),
    )
    zero: dict[str, bool | float | int | str] = dict.fromkeys(
        (*_COUNTERS, "api_calls", "storage_byte_hours", "topic_days"), 0
    )
    joined = counters.join(storage, "tenant", "full").fillna(zero)
    gb_hours = (_int38(F.col("storage_byte_hours")) / _int38(GB)).cast(QUANTITY)
    return joined.select(
        "tenant",
        *_COUNTERS,
        "api_calls",
        "storage_byte_hours",
        gb_hours.alias("storage_gb_hours"),
        "topic_days",
    )


def _add(acc: Column, value: Column) -> Column:
    return acc + F.coalesce(value, F.lit(0)).cast("long")


def _priced(usage: DataFrame, prices: DataFrame) -> DataFrame:
    """Usage with its tenant's prices; namespaces the export does not know get the ``*`` row."""
    default = prices.filter(F.col("tenant") == "*").select(
        *[F.col(c).alias(f"_d_{c}") for c in ("plan", "currency", *_PRICE_COLUMNS)]
    )
    own = prices.filter(F.col("tenant") != "*")
    joined = usage.join(own, "tenant", "left").join(F.broadcast(default), how="left")
    return joined.select(
        *usage.columns,
        *[F.coalesce(F.col(c), F.col(f"_d_{c}")).alias(c) for c in ("plan", "currency")],
        *[F.coalesce(F.col(c), F.col(f"_d_{c}")).cast("decimal(12,4)").alias(c) for c in _PRICE_COLUMNS],
    )


def unpriced_tenants(usage: DataFrame, prices: DataFrame) -> list[str]:
    """Tenants with usage but no price (no own row and no ``*`` row): the job refuses to bill them."""
    rows = _priced(usage, prices).filter(F.col("plan").isNull()).select("tenant").collect()
    return sorted(str(r["tenant"]) for r in rows)


def _micros(price: Column) -> Column:
    """A decimal(12,4) price as integer micro-units."""
    return _int38(price * 1_000_000)


def invoice_lines(usage: DataFrame, prices: DataFrame) -> DataFrame:
    """One line per tenant and billed item with a non-zero quantity (schema ``INVOICE_LINES``)."""
    priced = _priced(usage, prices)
    parts = []
    for it in BILLING_ITEMS:
        raw = F.col(it.usage_column)
        numerator = _int38(raw) * _micros(F.col(it.price_column))
        divisor = it.price_divisor
        amount = F.expr(f"(cast(_num as decimal(38,0)) * 2 + {divisor}BD) div {divisor * 2}BD")
        quantity = (_int38(raw) / _int38(it.quantity_divisor)).cast(QUANTITY)
        parts.append(
            priced.withColumn("_num", numerator).select(
                "tenant",
                "plan",
                F.lit(it.item).alias("item"),
                raw.cast("long").alias("quantity_raw"),
                quantity.alias("quantity"),
                F.lit(it.unit).alias("unit"),
                F.col(it.price_column).alias("unit_price"),
                F.lit(it.price_unit).alias("price_unit"),
                amount.cast("long").alias("amount_micros"),
                "currency",
            )
        )
    lines = reduce(DataFrame.unionByName, parts).filter(F.col("quantity_raw") > 0)
    return lines.withColumn("amount", _as_money(F.col("amount_micros"))).select(
        "tenant", "plan", "item", "quantity_raw", "quantity", "unit", "unit_price", "price_unit",
        "amount_micros", "amount", "currency",
    )  # fmt: skip


def _as_money(micros: Column) -> Column:
    return (micros.cast("decimal(20,0)") * F.expr("0.000001BD")).cast(MONEY)


def monthly_invoices(
    month_lines: DataFrame,
    prices: DataFrame,
    period_start: str,
    period_end: str,
    days_billed: int,
    final: bool,
) -> DataFrame:
    """One invoice per tenant for the month: the plan's monthly fee plus every daily line so far.

    Tenants in the price export get an invoice even without usage (the fee); the total is rounded
    half up to cents once, from the exact micro-unit sum (schema ``INVOICES``).
    """
    usage = month_lines.groupBy("tenant").agg(F.sum("amount_micros").cast("long").alias("usage_micros"))
    known = prices.filter(F.col("tenant") != "*").select("tenant")
    tenants = usage.select("tenant").unionByName(known).distinct()
    priced = _priced(tenants, prices).join(usage, "tenant", "left")
    base = F.when(F.col("price_monthly").isNull(), F.lit(0)).otherwise(_micros(F.col("price_monthly")))
    with_totals = (
        priced.withColumn("base_micros", base.cast("long"))
        .withColumn("usage_micros", F.coalesce("usage_micros", F.lit(0)).cast("long"))
        .withColumn("total_micros", F.col("base_micros") + F.col("usage_micros"))
        .withColumn("_cents", F.expr("(cast(total_micros as decimal(38,0)) * 2 + 10000BD) div 20000BD"))
    )
    return with_totals.select(
        "tenant",
        "plan",
        "currency",
        F.lit(period_start).alias("period_start"),
        F.lit(period_end).alias("period_end"),
        F.lit(days_billed).cast("int").alias("days_billed"),
        "base_micros",
        "usage_micros",
        "total_micros",
        (F.col("_cents").cast("decimal(16,0)") * F.expr("0.01BD")).cast("decimal(14,2)").alias("total"),
        F.lit(final).alias("final"),
    )
