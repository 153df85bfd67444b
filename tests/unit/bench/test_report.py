"""The benchmark report generator: records (the harnesses' JSON) -> table rows, doc section, PNG charts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PIL import Image

from bench import report

MACHINE = {
    "cores": 2, "memory_gib": 23.5, "cpu_model": "AMD EPYC", "arch": "x86_64", "kernel": "6.18.44",
    "os": "Debian GNU/Linux 12", "python": "3.11.7",
}  # fmt: skip


def _record(bench: str, figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "bench": bench,
        "command": f"uv run python -m bench.{bench} --quick --json bench/results/{bench}.json",
        "started": "2026-11-24 22:00 UTC",
        "seconds": 41.5,
        "load_before": 1.5,
        "load_after": 2.25,
        "machine": MACHINE,
        "figures": figures,
    }


BROKER = _record(
    "broker_bench",
    {
        "produce_batched_msgs_per_s": 35344.4,
        "nats_publish_msgs_per_s": 11469.0,
        "consume_msgs_per_s": 4468.0,
        "nats_consume_msgs_per_s": 11128.0,
        "e2e_p99_ms": 7825.0,
        "e2e_p99_ms_at_300_msgs_per_s": 96.9,
        "ratios": {"batched_vs_nats": 3.08, "consume_vs_nats": 0.4, "sync_vs_rabbitmq_quorum": None},
        "machine": {"cpus": 2},
    },
)
STORE = _record(
    "store_bench",
    {"append_mb_s": 327.0, "disk_write_mb_s": 1974.0, "append_vs_disk_ratio": 0.1657, "mode": "quick",
     "recovery_s_per_gib": 7.9},
) | {"steal_share": 0.084}  # fmt: skip
# a harness the generator has no declaration for (as a new one would be)
NEW = _record("fifo_bench", {"fifo_msgs_per_s": 900, "fifo_vs_normal_ratio": 0.75, "in_order": True})


def test_ratio_rows_show_both_sides_the_value_and_the_target() -> None:
    rows = report.ratio_rows([BROKER, STORE, NEW])
    assert rows == [
        ["broker_bench", "batched_vs_nats", "produce_batched_msgs_per_s = 35,344",
         "nats_publish_msgs_per_s = 11,469", "3.08", ">= 1.0", "yes", "-"],
        ["broker_bench", "consume_vs_nats", "consume_msgs_per_s = 4,468", "nats_consume_msgs_per_s = 11,128",
         "0.4", ">= 1.0", "no", "-"],
        ["store_bench", "append_vs_disk_ratio", "append_mb_s = 327", "disk_write_mb_s = 1,974", "0.166",
         ">= 0.4", "no", "-"],
        ["fifo_bench", "fifo_vs_normal_ratio", "-", "-", "0.75", "-", "", "-"],
    ]  # fmt: skip


def test_ratio_rows_give_the_ratio_of_each_pair_of_alternating_rounds() -> None:
    figures = {
        "produce_single_msgs_per_s": 2613,
        "produce_single_msgs_per_s_rounds": [2613, 2937, 2254],
        "grpc_ceiling_single_msgs_per_s": 3642,
        "grpc_ceiling_single_msgs_per_s_rounds": [3714, 3642, 3447],
        "consume_msgs_per_s": 4000,
        "consume_msgs_per_s_rounds": [4000, 4100],  # not paired with NATS's three rounds: no column
        "nats_consume_msgs_per_s": 8000,
        "nats_consume_msgs_per_s_rounds": [8000, 7000, 9000],
        "e2e_p99_ms": 12.0,
        "e2e_p99_ms_rounds": [12.0, 8.0, 20.0],
        "grpc_ceiling_e2e_p99_ms": 10.0,
        "grpc_ceiling_e2e_p99_ms_rounds": [10.0, 0, 10.0],  # a zero round: no ratio can be made
        "ratios": {"single_vs_bare_single": 0.72, "consume_vs_nats": 0.5, "e2e_vs_grpc_ceiling": 1.2},
    }
    rows = {row[1]: row for row in report.ratio_rows([_record("broker_bench", figures)])}
    # 2613/3714, 2937/3642, 2254/3447 to two places; two of them below 0.8
    assert rows["single_vs_bare_single"][4] == "0.72"
    assert rows["single_vs_bare_single"][7] == "0.7 / 0.81 / 0.65 (1 of 3 met)"
    assert rows["consume_vs_nats"][7] == "-"
    assert rows["e2e_vs_grpc_ceiling"][7] == "-"
    assert report.round_ratios(figures, "e2e_p99_ms", "e2e_p99_ms") == [1.0, 1.0, 1.0]


def test_figure_rows_flatten_and_check_targets() -> None:
    rows = report.figure_rows(STORE)
    assert ["recovery_s_per_gib", "7.90", "< 10", "yes"] in rows
    assert ["append_mb_s", "327", "-", ""] in rows
    assert not any(r[0] == "mode" for r in rows)  # run metadata is not a figure
    # a ratio carries its target in the harness table too
    assert ["ratios.batched_vs_nats", "3.08", ">= 1.0", "yes"] in report.figure_rows(BROKER)
    assert not any(r[0].startswith("machine") for r in report.figure_rows(BROKER))


def _png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000, path
    with Image.open(path) as image:
        image.verify()


def test_main_renders_the_section_and_charts_and_keeps_the_hand_written_text(tmp_path: Path) -> None:
    # given two records and a doc with hand-written sections (one appended by someone else later)
    data = tmp_path / "data"
    data.mkdir()
    for record in (BROKER, STORE):
        (data / f"{record['bench']}.json").write_text(json.dumps(record))
    doc = tmp_path / "docs" / "benchmarks.md"
    doc.parent.mkdir()
    doc.write_text("# Benchmarks\n\n## Storage engine\n\nrun 1 by hand: 1,974 MB/s\n")
    charts = tmp_path / "docs" / "bench"
    # when
    assert report.main(["--data", str(data), "--doc", str(doc), "--charts", str(charts)]) == 0
    text = doc.read_text()
    # then the section sits after the title, the hand-written text is untouched
    assert text.startswith("# Benchmarks\n\n" + report.BEGIN)
    assert text.endswith("## Storage engine\n\nrun 1 by hand: 1,974 MB/s\n")
    section = text[text.index(report.BEGIN) : text.index(report.END)]
    assert "| broker_bench | batched_vs_nats | produce_batched_msgs_per_s = 35,344 | " in section
    row = "| store_bench | append_vs_disk_ratio | append_mb_s = 327 | disk_write_mb_s = 1,974 | 0.166 |"
    assert row + " >= 0.4 | no |" in section
    assert "| e2e_p99_ms | 7,825 | < 10 | no |" in section
    assert "`uv run python -m bench.store_bench --quick --json bench/results/store_bench.json`" in section
    assert "2 cores, 23.5 GiB memory, AMD EPYC (x86_64), kernel 6.18.44" in section
    # the hypervisor's share of a run's CPU time, where the record has it (older ones do not)
    stolen = "8.4% of the CPU time it wanted stolen by the hypervisor."
    assert f"load average 1.5 before, 2.25 after, {stolen}" in section
    assert section.count("stolen by the hypervisor") == 1
    # harnesses of bench/ without a record are named, not silently left out
    missing = next(line for line in section.splitlines() if line.startswith("Not measured"))
    assert "ha_bench" in missing and "store_bench" not in missing
    assert "![ratios](bench/ratios.png)" in section and "![store_bench](bench/store_bench.png)" in section
    for name in ("broker_bench", "store_bench", "ratios"):
        _png(charts / f"{name}.png")
    # when a harness is re-measured and the section regenerated, it is replaced in place, once
    doc.write_text(text + "\n## FIFO\n\nappended by hand\n")
    (data / "store_bench.json").write_text(
        json.dumps({**STORE, "figures": {**STORE["figures"], "append_mb_s": 400.0}})
    )
    report.main(["--data", str(data), "--doc", str(doc), "--charts", str(charts)])
    again = doc.read_text()
    assert again.count(report.BEGIN) == 1 and again.count(report.END) == 1
    assert "append_mb_s = 400" in again and "append_mb_s = 327" not in again
    assert again.endswith("## FIFO\n\nappended by hand\n") and "run 1 by hand: 1,974 MB/s" in again
