"""An independent pure-Python computation of the jobs' figures, to check Spark's results exactly.

Deliberately naive (dicts and loops, ``decimal`` for money): it shares only the billing units in
``analytics.constants`` with the Spark code. Tests and ``bench/analytics_bench.py`` compare with it.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from analytics.constants import BILLING_ITEMS, GB

__all__ = (
    "dedupe",
    "invoice_lines",
    "lag_daily",
    "monthly_invoice",
    "percentile_disc",
    "read_day",
    "usage_daily",
)

Record = dict[str, Any]
_COUNTERS = ("messages_in", "messages_out", "requests_in_4k", "requests_out_4k", "bytes_in", "bytes_out")


def read_day(root: Path, tree: str, day: str, hours: Iterable[str] | None = None) -> Iterator[Record]:
    wanted = set(hours) if hours is not None else None
    for path in sorted((root / tree / f"date={day}").glob("hour=*/*.jsonl")):
        if wanted is not None and path.parent.name.split("=")[1] not in wanted:
            continue
        with open(path) as f:
            for line in f:
                yield json.loads(line)


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def dedupe(records: Iterable[Record]) -> list[Record]:
    best: dict[tuple[str, str], Record] = {}
    for r in records:
        key = (r["tenant"], r["id"])
        old = best.get(key)
        if old is None or _parse(r["written_at"]) > _parse(old["written_at"]):
            best[key] = r
    return list(best.values())


def usage_daily(records: Iterable[Record], day: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = defaultdict(
        lambda: {**dict.fromkeys(_COUNTERS, 0), "api_calls": 0, "storage_byte_hours": 0, "topic_days": 0}
    )
    hourly: dict[tuple[str, str, str, str], Record] = {}
    for r in records:
        if r["kind"] == "usage" and r["minute"][:10] == day:
            row = out[r["tenant"]]
            for c in _COUNTERS:
                row[c] += r.get(c) or 0
            row["api_calls"] += sum((r.get("api_calls") or {}).values())
        elif r["kind"] == "storage" and r["ts"][:10] == day:
            key = (r["tenant"], r["broker"], r["topic"], r["ts"][11:13])
            old = hourly.get(key)
            if old is None or (r["ts"], r["id"]) > (old["ts"], old["id"]):
                hourly[key] = r
    topics: dict[str, set[str]] = defaultdict(set)
    for (tenant, _, topic, _), r in hourly.items():
        out[tenant]["storage_byte_hours"] += r["bytes"] or 0
        topics[tenant].add(topic)
    for tenant, names in topics.items():
        out[tenant]["topic_days"] = len(names)
    for row in out.values():
        row["storage_gb_hours"] = (Decimal(row["storage_byte_hours"]) / GB).quantize(
            Decimal("0.000001"), ROUND_HALF_UP
        )
    return dict(out)


def _price(prices: dict[str, Record], tenant: str) -> Record:
    return prices.get(tenant) or prices["*"]


def invoice_lines(usage: dict[str, dict[str, Any]], prices: dict[str, Record]) -> list[Record]:
    lines = []
    for tenant, row in sorted(usage.items()):
        plan = _price(prices, tenant)
        for it in BILLING_ITEMS:
            raw = row[it.usage_column]
            if raw <= 0:
                continue
            # raw x price / divisor in micro-units, rounded half up with integers only
            micros = (raw * int(Decimal(plan[it.price_column]) * 1_000_000) * 2 + it.price_divisor) // (
                2 * it.price_divisor
            )
            lines.append(
                {"tenant": tenant, "plan": plan["plan"], "item": it.item, "quantity_raw": raw,
                 "amount_micros": micros}
            )  # fmt: skip
    return lines


def monthly_invoice(lines: Iterable[Record], prices: dict[str, Record]) -> dict[str, dict[str, Any]]:
    usage: dict[str, int] = defaultdict(int)
    for line in lines:
        usage[line["tenant"]] += line["amount_micros"]
    tenants = set(usage) | {t for t in prices if t != "*"}
    out = {}
    for tenant in sorted(tenants):
        base = int(Decimal(_price(prices, tenant)["price_monthly"]) * 1_000_000)
        total = base + usage.get(tenant, 0)
        cents = (total * 2 + 10_000) // 20_000
        out[tenant] = {"base_micros": base, "usage_micros": usage.get(tenant, 0), "total_micros": total,
                       "total": Decimal(cents) / 100}  # fmt: skip
    return out


def percentile_disc(values: list[int], p: float) -> int:
    """Nearest rank: the smallest value with at least ``p`` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def lag_daily(
    records: Iterable[Record],
    day: str,
    slos: dict[tuple[str, str], tuple[int | None, int | None]],
    stuck_after: int,
) -> dict[tuple[str, str], dict[str, Any]]:
    """``records``: the day's lag samples plus the previous day's last hour (already de-duplicated)."""
    first = int(_parse(day + "T00:00:00Z").timestamp()) // 60
    queue_minute: dict[tuple[Any, ...], Record] = {}
    for r in records:
        minute = int(_parse(r["ts"]).timestamp()) // 60
        key = (r["tenant"], r["group"], r["topic"], r["broker"], r["queue_id"], minute)
        old = queue_minute.get(key)
        if old is None or (r["ts"], r["id"]) > (old["ts"], old["id"]):
            queue_minute[key] = r
    per_group: dict[tuple[str, str], dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    series: dict[tuple[Any, ...], dict[int, Record]] = defaultdict(dict)
    for (tenant, group, topic, broker, queue_id, minute), r in queue_minute.items():
        series[(tenant, group, topic, broker, queue_id)][minute] = r
        if first <= minute < first + 1440:
            cell = per_group[(tenant, group)][minute]
            cell[0] += r["lag_messages"]
            cell[1] = max(cell[1], r["lag_ms"])
    stuck: dict[tuple[str, str], set[int]] = defaultdict(set)
    stuck_queues: dict[tuple[str, str], set[tuple[Any, ...]]] = defaultdict(set)
    for queue, by_minute in series.items():
        for minute, r in by_minute.items():
            if not first <= minute < first + 1440 or (minute - stuck_after) not in by_minute:
                continue
            span = [by_minute[m] for m in range(minute - stuck_after, minute + 1) if m in by_minute]
            offsets = {s["committed_offset"] for s in span}
            if len(offsets) == 1 and r["lag_messages"] > by_minute[minute - stuck_after]["lag_messages"]:
                stuck[queue[:2]].add(minute)
                stuck_queues[queue[:2]].add(queue)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for group_key, minutes in per_group.items():
        msgs = [v[0] for v in minutes.values()]
        times = [v[1] for v in minutes.values()]
        slo_messages, slo_seconds = slos.get(group_key, (None, None))
        above = None
        if slo_messages is not None or slo_seconds is not None:
            above = sum(
                1
                for m, t in zip(msgs, times, strict=True)
                if (slo_messages is not None and m > slo_messages)
                or (slo_seconds is not None and t > slo_seconds * 1000)
            )
        out[group_key] = {
            "minutes_sampled": len(msgs),
            "p50_lag_messages": percentile_disc(msgs, 0.5),
            "p95_lag_messages": percentile_disc(msgs, 0.95),
            "max_lag_messages": max(msgs),
            "p50_lag_ms": percentile_disc(times, 0.5),
            "p95_lag_ms": percentile_disc(times, 0.95),
            "max_lag_ms": max(times),
            "minutes_above_slo": above,
            "stuck_minutes": len(stuck[group_key]),
            "stuck_queues": len(stuck_queues[group_key]),
        }
    return out
