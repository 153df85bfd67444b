"""Run-report rendering without Spark: the page's figures, escaping, and charts for an empty day."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from analytics.report.charts import billing_charts, lag_charts
from analytics.report.data import BillingReportData, LagReportData
from analytics.report.page import billing_page, lag_page, money

USAGE = {
    "messages_in": 1012, "messages_out": 20, "requests_in_4k": 262156, "requests_out_4k": 20,
    "bytes_in": 49152 + 1024**3, "bytes_out": 81920, "api_calls": 1015,
    "storage_byte_hours": 5 * 1024**3 + 1024**3 // 2, "storage_gb_hours": Decimal("5.500000"),
    "topic_days": 2,
}  # fmt: skip


def test_money_is_exact_to_the_micro_unit() -> None:
    assert [money(136_610), money(2), money(10_000_000)] == ["0.136610", "0.000002", "10.000000"]


def test_billing_page_has_each_tenant_a_total_row_and_escapes_names() -> None:
    data = BillingReportData(
        day="2025-03-10",
        usage=[{"tenant": "acme", **USAGE}, {"tenant": "<b>x</b>", **USAGE, "messages_in": 8}],
        day_charges={"acme": 136_610, "<b>x</b>": 4},
        month_charges={"2025-03-10": {"acme": 136_610, "<b>x</b>": 4}},
        invoices=[],
    )
    page = billing_page(data, {"job": "billing"}, ["tenant_usage.png"])
    assert '<td data-field="charges" class="n">0.136610</td>' in page
    assert '<td data-field="requests_in_4k" class="n">262,156</td>' in page
    assert '<td data-field="storage_gb_hours" class="n">5.500000</td>' in page
    # the total row adds the tenants up
    total = page[page.index('data-tenant="*"') :]
    assert '<td data-field="messages_in" class="n">1,020</td>' in total
    assert '<td data-field="charges" class="n">0.136614</td>' in total
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert '<img src="tenant_usage.png"' in page


def test_lag_page_shows_seconds_and_leaves_no_slo_empty() -> None:
    row = {
        "tenant": "acme", "group": "g", "minutes_sampled": 60, "p50_lag_messages": 7, "p95_lag_messages": 277,
        "max_lag_messages": 307, "p50_lag_ms": 500, "p95_lag_ms": 27500, "max_lag_ms": 30500,
        "lag_slo_messages": None, "lag_slo_seconds": None, "minutes_above_slo": None, "stuck_minutes": 20,
        "stuck_queues": 1, "trend_lag_messages_pct": 84.666,
    }  # fmt: skip
    page = lag_page(LagReportData(day="2025-03-10", groups=[row], history={}), {}, [])
    assert '<td data-field="p95_lag_s" class="n">27.500</td>' in page
    assert '<td data-field="minutes_above_slo" class="n"></td>' in page
    assert '<td data-field="trend_lag_messages_pct" class="n">+84.7%</td>' in page


def test_an_empty_day_still_gets_every_chart(tmp_path: Path) -> None:
    empty = BillingReportData(day="2025-03-31", usage=[], day_charges={}, month_charges={}, invoices=[])
    names = billing_charts(empty, tmp_path) + lag_charts(LagReportData("2025-03-31", [], {}), tmp_path)
    assert names == ["tenant_usage.png", "daily_charges.png", "lag_percentiles.png", "lag_trend.png"]
    for name in names:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 3_000
