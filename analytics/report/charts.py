"""PNG charts of a run report, drawn with matplotlib's object API (no pyplot global state).

Each chart shows at most ``TOP`` tenants or groups (the largest), so a day with a thousand tenants
still gives a readable picture; the HTML table beside it lists every row. A chart with nothing to
draw still gets written, saying so, so the report's links are never broken.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analytics.constants import GB
from analytics.report.data import BillingReportData, LagReportData

__all__ = ("TOP", "billing_charts", "lag_charts")

TOP = 20
_STACKED = 8  # tenants drawn in their own colour in the stacked chart; the rest are "others"
_DPI = 100


def _save(figure: Figure, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=_DPI)


def _empty(axes: Axes, message: str) -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes)
    axes.set_axis_off()


def _grouped_barh(axes: Axes, labels: Sequence[str], series: dict[str, Sequence[float]], unit: str) -> None:
    """Horizontal bars, one group per label, one bar per series; largest label on top."""
    height = 0.8 / max(1, len(series))
    positions = range(len(labels))
    for i, (name, values) in enumerate(series.items()):
        axes.barh([p + i * height for p in positions], values, height=height, label=name)
    axes.set_yticks([p + height * (len(series) - 1) / 2 for p in positions], labels=list(labels))
    axes.invert_yaxis()
    axes.set_xlabel(unit)
    axes.legend(loc="lower right", fontsize="small")
    axes.grid(axis="x", alpha=0.3)


def _figure(rows: int, panels: int = 1) -> Figure:
    return Figure(figsize=(6 * panels, max(3.0, 1.2 + 0.35 * rows)))


def billing_charts(data: BillingReportData, directory: Path) -> list[str]:
    """``tenant_usage.png`` (requests and transfer per tenant) and ``daily_charges.png``."""
    by_requests = sorted(data.usage, key=lambda r: -(r["requests_in_4k"] + r["requests_out_4k"]))[:TOP]
    labels = [r["tenant"] for r in by_requests]
    figure = _figure(len(labels), panels=2)
    left, right = figure.subplots(1, 2)
    if labels:
        _grouped_barh(
            left,
            labels,
            {
                "in": [r["requests_in_4k"] for r in by_requests],
                "out": [r["requests_out_4k"] for r in by_requests],
            },
            "requests (4 KiB units)",
        )
        _grouped_barh(
            right,
            labels,
            {
                "in": [r["bytes_in"] / GB for r in by_requests],
                "out": [r["bytes_out"] / GB for r in by_requests],
            },
            "transfer (GB)",
        )
        right.set_yticks(right.get_yticks(), labels=[""] * len(labels))
    else:
        _empty(left, "no usage on this day")
        _empty(right, "no usage on this day")
    figure.suptitle(f"Usage per tenant on {data.day}" + (f" (top {TOP})" if len(data.usage) > TOP else ""))
    _save(figure, directory / "tenant_usage.png")

    totals: dict[str, int] = {}
    for per_tenant in data.month_charges.values():
        for tenant, micros in per_tenant.items():
            totals[tenant] = totals.get(tenant, 0) + micros
    shown = sorted(totals, key=lambda t: -totals[t])[:_STACKED]
    days = list(data.month_charges)
    figure = Figure(figsize=(max(6.0, 0.45 * len(days) + 2), 4))
    axes = figure.subplots()
    if days and totals:
        bottoms = [0.0] * len(days)
        stacks = {t: [data.month_charges[d].get(t, 0) / 1e6 for d in days] for t in shown}
        others = [sum(v for t, v in data.month_charges[d].items() if t not in shown) / 1e6 for d in days]
        if any(others):
            stacks["others"] = others
        # integer positions with day labels: matplotlib would guess "09" to be a number or a date
        for name, values in stacks.items():
            axes.bar(range(len(days)), values, bottom=bottoms, label=name)
            bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
        axes.set_xticks(range(len(days)), labels=[d[8:] for d in days])
        axes.set_xlabel(f"day of {data.day[:7]}")
        axes.set_ylabel("usage charges")
        axes.legend(fontsize="small", ncols=2)
        axes.grid(axis="y", alpha=0.3)
    else:
        _empty(axes, "no charges this month")
    axes.set_title(f"Daily usage charges per tenant, {data.day[:7]} to {data.day}")
    _save(figure, directory / "daily_charges.png")
    return ["tenant_usage.png", "daily_charges.png"]


def lag_charts(data: LagReportData, directory: Path) -> list[str]:
    """``lag_percentiles.png`` (p50/p95/max per group) and ``lag_trend.png`` (p95 over 8 days)."""
    top = sorted(data.groups, key=lambda r: -(r["p95_lag_messages"] or 0))[:TOP]
    labels = [f"{r['tenant']}/{r['group']}" for r in top]
    figure = _figure(len(labels), panels=2)
    left, right = figure.subplots(1, 2)
    if labels:
        _grouped_barh(
            left,
            labels,
            {p: [r[f"{p}_lag_messages"] or 0 for r in top] for p in ("p50", "p95", "max")},
            "lag (messages)",
        )
        _grouped_barh(
            right,
            labels,
            {p: [(r[f"{p}_lag_ms"] or 0) / 1000 for r in top] for p in ("p50", "p95", "max")},
            "lag (seconds)",
        )
        right.set_yticks(right.get_yticks(), labels=[""] * len(labels))
    else:
        _empty(left, "no lag samples on this day")
        _empty(right, "no lag samples on this day")
    figure.suptitle(
        f"Consumer lag percentiles on {data.day}" + (f" (top {TOP})" if len(data.groups) > TOP else "")
    )
    _save(figure, directory / "lag_percentiles.png")

    figure = Figure(figsize=(7, 4))
    axes = figure.subplots()
    days = list(data.history)
    if top and days:
        for r in top[:_STACKED]:
            key = (r["tenant"], r["group"])
            points = [(i, data.history[d][key]) for i, d in enumerate(days) if key in data.history[d]]
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{key[0]}/{key[1]}")
        axes.set_xticks(range(len(days)), labels=[d[5:] for d in days])
        axes.set_ylabel("p95 lag (messages)")
        axes.legend(fontsize="small")
        axes.grid(alpha=0.3)
    else:
        _empty(axes, "no lag history")
    axes.set_title(f"p95 lag, the week before {data.day} and the day")
    _save(figure, directory / "lag_trend.png")
    return ["lag_percentiles.png", "lag_trend.png"]
