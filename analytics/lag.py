"""Consumer-lag reports as pure DataFrame transformations (no I/O; ``analytics.jobs`` does that).

Samples (every 30 s per group, topic and queue) are reduced to one value per queue and UTC minute
(the last sample of the minute). A group's lag in a minute is the sum of its queues' lag in messages
and the largest of their lag in time. Percentiles are nearest-rank (``percentile_disc``): the
smallest minute value with at least p of the day's minutes at or below it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

__all__ = ("group_minutes", "lag_daily", "queue_minutes", "stuck_queue_minutes")

_QUEUE = ("tenant", "group", "topic", "broker", "queue_id")


def queue_minutes(records: DataFrame) -> DataFrame:
    """The last sample of each queue in each minute; ``minute`` is minutes since the epoch."""
    with_minute = records.filter(F.col("kind") == "lag").withColumn(
        "minute", F.floor(F.unix_timestamp(F.to_timestamp("ts")) / 60).cast("long")
    )
    last = Window.partitionBy(*_QUEUE, "minute").orderBy(F.to_timestamp("ts").desc(), F.col("id").desc())
    return (
        with_minute.withColumn("_n", F.row_number().over(last))
        .filter("_n = 1")
        .select(
            *_QUEUE,
            "minute",
            F.coalesce("lag_messages", F.lit(0)).alias("lag_messages"),
            F.coalesce("lag_ms", F.lit(0)).alias("lag_ms"),
            "committed_offset",
        )
    )


def _in_day(first_minute: int) -> Column:
    return (F.col("minute") >= first_minute) & (F.col("minute") < first_minute + 1440)


def group_minutes(queues: DataFrame, first_minute: int) -> DataFrame:
    """Per group and minute of the day: total lag in messages, largest lag in time."""
    return (
        queues.filter(_in_day(first_minute))
        .groupBy("tenant", "group", "minute")
        .agg(
            F.sum("lag_messages").cast("long").alias("lag_messages"),
            F.max("lag_ms").cast("long").alias("lag_ms"),
        )
    )


def stuck_queue_minutes(queues: DataFrame, first_minute: int, stuck_after: int) -> DataFrame:
    """Minutes of the day in which a queue is stuck.

    A queue is stuck at minute m when it has a sample at m - N, its committed offset did not move
    in [m - N, m] (nothing acked) and its lag at m is larger than at m - N (lag growing). ``queues``
    should include the previous day's last hour so the first minutes of the day can be judged.
    """
    span = Window.partitionBy(*_QUEUE).orderBy("minute").rangeBetween(-stuck_after, 0)
    judged = (
        queues.withColumn("_first_minute", F.min("minute").over(span))
        .withColumn("_first_lag", F.first("lag_messages").over(span))
        .withColumn("_low", F.min("committed_offset").over(span))
        .withColumn("_high", F.max("committed_offset").over(span))
    )
    stuck = (
        (F.col("_first_minute") == F.col("minute") - stuck_after)
        & (F.col("_low") == F.col("_high"))
        & (F.col("lag_messages") > F.col("_first_lag"))
    )
    return judged.filter(stuck & _in_day(first_minute)).select(*_QUEUE, "minute")


def _percentile(p: float, column: str) -> Column:
    return F.expr(f"percentile_disc({p}) WITHIN GROUP (ORDER BY {column})").cast("long")


def _trend(today: str, before: str) -> Column:
    return F.when(F.col(before) > 0, (F.col(today) - F.col(before)) / F.col(before) * 100.0)


def lag_daily(minutes: DataFrame, stuck: DataFrame, groups: DataFrame, previous_week: DataFrame) -> DataFrame:
    """One row per group with samples that day (schema ``LAG_DAILY``).

    ``groups`` carries each group's SLO (``lag_slo_messages`` and/or ``lag_slo_seconds``; a minute is
    above the SLO when it exceeds any threshold that is set; no threshold set -> null);
    ``previous_week`` holds the ``LAG_DAILY`` rows of the seven days before: the trend compares the
    day's p95 with their mean p95.
    """
    slo = groups.select("tenant", "group", "lag_slo_messages", "lag_slo_seconds")
    above = (F.col("lag_slo_messages").isNotNull() & (F.col("lag_messages") > F.col("lag_slo_messages"))) | (
        F.col("lag_slo_seconds").isNotNull() & (F.col("lag_ms") > F.col("lag_slo_seconds") * 1000)
    )
    has_slo = F.col("lag_slo_messages").isNotNull() | F.col("lag_slo_seconds").isNotNull()
    daily = (
        minutes.join(slo, ["tenant", "group"], "left")
        .groupBy("tenant", "group")
        .agg(
            F.count("*").cast("long").alias("minutes_sampled"),
            _percentile(0.5, "lag_messages").alias("p50_lag_messages"),
            _percentile(0.95, "lag_messages").alias("p95_lag_messages"),
            F.max("lag_messages").cast("long").alias("max_lag_messages"),
            _percentile(0.5, "lag_ms").alias("p50_lag_ms"),
            _percentile(0.95, "lag_ms").alias("p95_lag_ms"),
            F.max("lag_ms").cast("long").alias("max_lag_ms"),
            F.first("lag_slo_messages", ignorenulls=True).cast("long").alias("lag_slo_messages"),
            F.first("lag_slo_seconds", ignorenulls=True).cast("long").alias("lag_slo_seconds"),
            F.sum(F.when(above, 1).otherwise(0)).cast("long").alias("_above"),
        )
        .withColumn("minutes_above_slo", F.when(has_slo, F.col("_above")).cast("long"))
        .drop("_above")
    )
    stuck_daily = stuck.groupBy("tenant", "group").agg(
        F.countDistinct("minute").cast("long").alias("stuck_minutes"),
        F.countDistinct("topic", "broker", "queue_id").cast("long").alias("stuck_queues"),
    )
    before = previous_week.groupBy("tenant", "group").agg(
        F.avg("p95_lag_messages").alias("prev_week_p95_lag_messages"),
        F.avg("p95_lag_ms").alias("prev_week_p95_lag_ms"),
    )
    joined = (
        daily.join(stuck_daily, ["tenant", "group"], "left")
        .join(before, ["tenant", "group"], "left")
        .fillna({"stuck_minutes": 0, "stuck_queues": 0})
    )
    return joined.select(
        "tenant", "group", "minutes_sampled",
        "p50_lag_messages", "p95_lag_messages", "max_lag_messages",
        "p50_lag_ms", "p95_lag_ms", "max_lag_ms",
        "lag_slo_messages", "lag_slo_seconds", "minutes_above_slo",
        "stuck_minutes", "stuck_queues",
        "prev_week_p95_lag_messages", "prev_week_p95_lag_ms",
        _trend("p95_lag_messages", "prev_week_p95_lag_messages").alias("trend_lag_messages_pct"),
        _trend("p95_lag_ms", "prev_week_p95_lag_ms").alias("trend_lag_ms_pct"),
    )  # fmt: skip
