"""Each run's HTML report and PNG charts, on real Spark: figures equal an independent computation."""

from __future__ import annotations

import json
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from analytics import jobs, reference
from analytics.synthetic import synthetic_usage, write_control_exports, write_records
from tests.integration.analytics.conftest import PRICES
from tests.integration.analytics.test_lag import GROUPS, _samples

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DAY_BEFORE, DAY = "2025-03-09", "2025-03-10"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _Rows(HTMLParser):
    """Cells of every table row: {table id: {row key: {data-field: text}}}."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, dict[str, str]]] = {}
        self._table = self._row = self._field = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id") or ""
            self.tables[self._table] = {}
        elif tag == "tr" and "data-tenant" in a:
            self._row = "/".join(filter(None, (a["data-tenant"], a.get("data-group"))))
            self.tables[self._table][self._row] = {}
        elif tag == "td" and self._row:
            self._field = a.get("data-field") or ""
            self.tables[self._table][self._row][self._field] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._field = ""
        elif tag == "tr":
            self._row = ""

    def handle_data(self, data: str) -> None:
        if self._row and self._field:
            self.tables[self._table][self._row][self._field] += data


def _tables(page: Path) -> dict[str, dict[str, dict[str, str]]]:
    parser = _Rows()
    parser.feed(page.read_text())
    return parser.tables


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    assert len(data) > 10_000, f"{path.name} is only {len(data)} bytes"
    with Image.open(path) as image:
        image.verify()  # decodes every chunk and checks its CRC
    with Image.open(path) as image:
        assert image.width >= 500 and image.height >= 250
        # a drawn chart has bars, text and axes in many colours, not a blank canvas
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 16) or []) > 50


def _six(micros: int) -> str:
    return f"{Decimal(micros) / Decimal(1_000_000):.6f}"


def test_billing_run_writes_html_and_charts_with_the_computed_figures(
    spark: Any, roots: tuple[Path, Path]
) -> None:
    # given two days of generated usage for five tenants (three billed at the default plan)
    root, out = roots
    for day, seed in ((DAY_BEFORE, 1), (DAY, 2)):
        write_records(root, "usage", synthetic_usage(day, tenants=5, brokers=2, minutes=60, seed=seed))
    # when both days run, the second one last
    jobs.run_job(spark, "billing", DAY_BEFORE, str(root), str(out))
    summary = jobs.run_job(spark, "billing", DAY, str(root), str(out)).as_dict()
    # then the run summary (what JobRun.details keeps) names the report, next to the Parquet outputs
    report = out / "reports" / "billing" / f"date={DAY}"
    assert summary["report"] == str(report) and summary["report_page"] == str(report / "index.html")
    assert summary["days"][0]["report"] == str(report)
    assert sorted(p.name for p in report.iterdir()) == [
        "daily_charges.png", "index.html", "report.json", "tenant_usage.png",
    ]  # fmt: skip
    for png in ("tenant_usage.png", "daily_charges.png"):
        _assert_png(report / png)
    # and every tenant's figures equal the independent pure-Python computation
    prices = {p["tenant"]: p for p in PRICES}
    usage = {
        d: reference.usage_daily(reference.dedupe(reference.read_day(root, "usage", d)), d)
        for d in (DAY_BEFORE, DAY)
    }
    lines = {d: reference.invoice_lines(usage[d], prices) for d in usage}
    invoices = reference.monthly_invoice([*lines[DAY_BEFORE], *lines[DAY]], prices)
    tables = _tables(report / "index.html")
    assert set(tables["usage"]) == {*usage[DAY], "*"} and len(usage[DAY]) == 5
    day_charges: dict[str, int] = {}
    for line in lines[DAY]:
        day_charges[line["tenant"]] = day_charges.get(line["tenant"], 0) + line["amount_micros"]
    for tenant, want in usage[DAY].items():
        row = tables["usage"][tenant]
        for field in ("messages_in", "messages_out", "requests_in_4k", "requests_out_4k", "topic_days"):
            assert row[field] == f"{want[field]:,}", (tenant, field)
        assert row["storage_gb_hours"] == f"{want['storage_gb_hours']:.6f}"
        assert row["gb_in"] == f"{Decimal(want['bytes_in']) / 1024**3:.6f}"
        assert row["charges"] == _six(day_charges[tenant]) and row["currency"] == "USD"
    total = tables["usage"]["*"]
    assert total["charges"] == _six(sum(day_charges.values()))
    assert total["messages_in"] == f"{sum(u['messages_in'] for u in usage[DAY].values()):,}"
    # the month to date: both days' lines plus the fee; initech (no usage) pays the fee only
    assert set(tables["invoices"]) == set(invoices) == {*usage[DAY], "acme", "initech"}
    for tenant, want in invoices.items():
        row = tables["invoices"][tenant]
        assert (row["total"], row["usage"], row["base"]) == (
            f"{want['total']:.2f}",
            _six(want["usage_micros"]),
            _six(want["base_micros"]),
        ), tenant
        assert row["days_billed"] == "2" and row["final"] == "month to date"
    # the JSON beside the page carries the same day charges, in micro-units
    assert json.loads((report / "report.json").read_text())["day_charges_micros"] == day_charges


def test_lag_run_writes_html_and_charts_with_the_percentiles(spark: Any, roots: tuple[Path, Path]) -> None:
    # given three groups with the samples worked out by hand in test_lag.py
    root, out = roots
    write_control_exports(root, DAY, PRICES, GROUPS)
    write_records(root, "lag", [r for g in ("g-both", "g-time", "g-none") for r in _samples(g)])
    # when
    summary = jobs.run_job(spark, "lag", DAY, str(root), str(out), stuck_after=10).as_dict()
    # then
    page = Path(summary["report_page"])
    assert page == out / "reports" / "lag" / f"date={DAY}" / "index.html"
    for png in ("lag_percentiles.png", "lag_trend.png"):
        _assert_png(page.parent / png)
    rows = _tables(page)["lag"]
    assert set(rows) == {"acme/g-both", "acme/g-time", "acme/g-none"}
    both = rows["acme/g-both"]
    assert [both[f"{p}_lag_messages"] for p in ("p50", "p95", "max")] == ["7", "277", "307"]
    assert [both[f"{p}_lag_s"] for p in ("p50", "p95", "max")] == ["0.500", "27.500", "30.500"]
    assert (both["minutes_above_slo"], both["stuck_minutes"], both["stuck_queues"]) == ("21", "20", "1")
    assert both["slo"] == "100 msgs / 20 s"
    assert rows["acme/g-time"]["minutes_above_slo"] == "11"
    assert rows["acme/g-none"]["minutes_above_slo"] == ""  # no SLO: nothing to count against


def test_report_is_skipped_when_asked(spark: Any, roots: tuple[Path, Path]) -> None:
    root, out = roots
    summary = jobs.run_job(spark, "billing", DAY, str(root), str(out), report=False).as_dict()
    assert summary["report"] == "" and not (out / "reports").exists()
