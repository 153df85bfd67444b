"""Run the benchmark harnesses, keep each one's figures with how and where it ran, then render the report.

    uv run python -m bench.run_all [--quick] [--only store_bench,analytics_bench] [--no-report]

``make bench`` calls this (``BENCH_FLAGS`` defaults to ``--quick``; ``BENCH=store_bench`` runs one).
Each harness runs as ``python -m bench.<name> FLAGS --json bench/results/<name>.json`` in its own
process. A harness that exits 0 with its JSON written gets a record ``docs/bench/data/<name>.json``:
the figures, the exact command, start and end time, and the machine (cores, memory, CPU model,
kernel, load average before and after). A failed harness keeps its previous record and makes this
command exit 1 once the others have run. ``bench/report.py`` then renders ``docs/benchmarks.md``'s
generated section and the charts from every record, so figures not re-measured stay as recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import report  # noqa: E402
from bench.procfs import machine_cpu_times, steal_share  # noqa: E402

RESULTS = REPO / "bench" / "results"


def _first(path: str, prefix: str) -> str:
    """The value of the first ``prefix: value`` line of a /proc file ('' when absent)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return ""
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith(prefix)), "")


def _os_name() -> str:
    try:
        lines = Path("/etc/os-release").read_text().splitlines()
    except OSError:
        return platform.system()
    return next((ln.split("=", 1)[1].strip('"') for ln in lines if ln.startswith("PRETTY_NAME=")), "")


def machine() -> dict[str, Any]:
    """What the figures depend on: CPUs, memory, CPU model, kernel, OS and Python."""
    mem_kib = _first("/proc/meminfo", "MemTotal").split()
    return {
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(int(mem_kib[0]) / 2**20, 1) if mem_kib else None,
        "cpu_model": _first("/proc/cpuinfo", "model name") or platform.processor(),
        "arch": platform.machine(),
        "kernel": platform.release(),
        "os": _os_name(),
        "python": platform.python_version(),
    }


def harnesses() -> list[str]:
    return sorted(p.stem for p in (REPO / "bench").glob("*_bench.py"))


def run_one(name: str, flags: list[str]) -> dict[str, Any] | None:
    """Run one harness; its record, or None when it failed (its output went to this terminal)."""
    out = RESULTS / f"{name}.json"
    out.unlink(missing_ok=True)  # a stale file must not pass for this run's figures
    argv = [sys.executable, "-m", f"bench.{name}", *flags, "--json", str(out.relative_to(REPO))]
    command = shlex.join(
        ["uv", "run", "python", "-m", f"bench.{name}", *flags, "--json", str(out.relative_to(REPO))]
    )
    print(f"== {command}", flush=True)
    load_before = os.getloadavg()[0]
    times_before = machine_cpu_times()
    started = datetime.now(UTC)
    began = time.monotonic()
    code = subprocess.run(argv, cwd=REPO, check=False).returncode
    seconds = time.monotonic() - began
    if code != 0 or not out.exists():
        print(f"!! {name} failed (exit {code}); its previous figures are kept", file=sys.stderr)
        return None
    return {
        "bench": name,
        "command": command,
        "started": started.strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(seconds, 1),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        # the share of the CPU time the VM wanted that the hypervisor took (bench/procfs.py): a slow stretch
        "steal_share": round(steal_share(times_before, machine_cpu_times()), 3),
        "machine": machine(),
        "figures": json.loads(out.read_text()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="each harness's short mode")
    parser.add_argument("--only", default="", help="comma-separated harness names (default: all)")
    parser.add_argument("--no-report", action="store_true", help="do not render docs/benchmarks.md")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or harnesses()
    unknown = sorted(set(names) - set(harnesses()))
    if unknown:
        parser.error(f"no such harness: {', '.join(unknown)} (have: {', '.join(harnesses())})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    report.DATA.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in names:
        record = run_one(name, ["--quick"] if args.quick else [])
        if record is None:
            failed.append(name)
            continue
        (report.DATA / f"{name}.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    if not args.no_report:
        report.main([])
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
