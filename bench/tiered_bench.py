"""Tiered storage benchmark: cold reads from an S3 server on loopback vs hot reads, and what offload
costs the producers.

    uv run python bench/tiered_bench.py [--quick] [--json PATH] [--dir DIR]

A moto S3 server (``python -m moto.server``) is started on a free loopback port and stopped by PID.
The store is a TieredMessageStore in this process, as in a broker; the offloader reads, hashes and
uploads segments from its child upload process, as in a broker. 4 KiB messages over 4 queues, 16 MiB
segments; 64 MiB per round with ``--quick``, else 512 MiB.

- cold_vs_hot_read_ratio: MB/s of sequential ``get_messages`` (batches of 32, every queue) over
  offloaded segments whose local copies were deleted (1 MiB blocks; read-ahead of 4 blocks that
  doubles per refill up to 16 MiB, one ranged GET per refill; cache emptied first) over the same reads
  while the segments were local (page cache); the median of 5 passes each.
- verified: every message read cold equals what was written (body, queue offset, keys).
- producer_slowdown_ratio: time to append 8 rounds of 64 MiB (``--quick``; else 2 of 512 MiB) while
  the offloader uploads a backlog of sealed segments, paced by the offloader at 50 MB/s, over the
  time of as many rounds without offloading (half before, half after). The S3 server's and the upload
  process's CPU during the rounds with offload are reported in cores (the machine's 2 are shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.procfs import cpu_seconds
from dataplane.store import MessageStoreConfig, MessageToStore
from dataplane.store.tiered import ObjectStoreSettings, TierConfig, TieredMessageStore

TOPIC = "bench%tiered"
QUEUES = 4
BODY_SIZE = 4096
BATCH = 64
SEGMENT = 16 << 20
OFFLOAD_RATE = 50 << 20
# Each read figure is the median of this many passes over everything (one pass is about 0.1 s: a
# single one moved by a third from run to run); cold passes start from an emptied block cache.
READ_REPEATS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(
                urllib.request.Request(f"{endpoint}/bench", method="PUT"), timeout=2
            ).close()
            return proc, endpoint
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.2)


def open_store(work: Path, endpoint: str, name: str, **tier_options: int | bool) -> TieredMessageStore:
    config = MessageStoreConfig(work / name, mapped_file_size_commit_log=SEGMENT, clean_interval_ms=3_600_000)
    tier = TierConfig(
        ObjectStoreSettings(
            url=f"s3://bench/{name}",
            endpoint=endpoint,
            region="us-east-1",
            access_key_id="bench",
            secret_access_key="bench",
        ),
        offload_after_ms=3_600_000,  # the bench drives the offloader itself
        offload_pending_bytes=1 << 40,
        hot_retention_hours=0,
        interval_ms=3_600_000,
        cache_bytes=64 << 20,
        block_bytes=1 << 20,
        prefetch_blocks=4,
        **tier_options,
    )
    store = TieredMessageStore(config, tier)
    store.start()
    return store


def fill(store: TieredMessageStore, total: int, seed: int) -> float:
    """Append ``total`` bytes of bodies; returns the seconds it took."""
    count = total // BODY_SIZE
    began = time.perf_counter()
    for start in range(0, count, BATCH):
        batch = [
            MessageToStore(
                TOPIC,
                i % QUEUES,
                (f"{seed}:{i}:".encode() * (BODY_SIZE // 8))[:BODY_SIZE],
                {"KEYS": f"k{seed}-{i}", "UNIQ_KEY": f"U{seed}-{i}"},
            )
            for i in range(start, min(count, start + BATCH))
        ]
        assert store.put_messages(batch).ok
    elapsed = time.perf_counter() - began
    store.commit_log.flush()
    return elapsed


def read_all(store: TieredMessageStore, seed: int) -> tuple[float, int, bool]:
    """Sequential reads of every queue from its minimum; returns (seconds, bytes, verified)."""
    began = time.perf_counter()
    size = 0
    ok = True
    for q in range(QUEUES):
        offset = store.get_min_offset_in_queue(TOPIC, q)
        end = store.get_max_offset_in_queue(TOPIC, q)
        while offset < end:
            result = store.get_messages(TOPIC, q, offset, 32)
            if not result.messages:
                ok = False
                break
            for m in result.messages:
                i = int(m.properties["UNIQ_KEY"].split("-")[1])
                ok = ok and m.queue_offset == offset and i % QUEUES == q
                ok = ok and m.body == (f"{seed}:{i}:".encode() * (BODY_SIZE // 8))[:BODY_SIZE]
                size += len(m.body)
                offset += 1
    return time.perf_counter() - began, size, ok


def bench_reads(work: Path, endpoint: str, total: int, repeats: int = READ_REPEATS) -> dict[str, object]:
    """Hot reads, then cold reads from an emptied cache, ``repeats`` times each; the medians."""
    store = open_store(work, endpoint, "reads")
    try:
        fill(store, total, 1)
        hot = [read_all(store, 1) for _ in range(repeats)]
        store.ensure_manifest()
        for mf in store.offloader.pending():
            store.offloader._offload(mf)
        store.delete_expired_files()
        cold_segments = len(store.view.segments)
        cold = []
        for _ in range(repeats):
            store.cache.clear()
            cold.append(read_all(store, 1))
        st = store.tier_status()
        hot_mb_s = [size / seconds / 1e6 for seconds, size, _ in hot]
        cold_mb_s = [size / seconds / 1e6 for seconds, size, _ in cold]
        hot_median, cold_median = statistics.median(hot_mb_s), statistics.median(cold_mb_s)
        sizes = {size for _, size, _ in hot + cold}
        return {
            "hot_read_mb_s": round(hot_median, 1),
            "cold_read_mb_s": round(cold_median, 1),
            "cold_vs_hot_read_ratio": round(cold_median / hot_median, 3),
            "hot_read_mb_s_runs": [round(x) for x in hot_mb_s],
            "cold_read_mb_s_runs": [round(x) for x in cold_mb_s],
            "cold_segments": cold_segments,
            "cold_cache_hit_rate": round(st.cache_hit_rate, 3),
            "verified": all(ok for _, _, ok in hot + cold) and len(sizes) == 1,
            "bytes_read": sizes.pop(),
        }
    finally:
        store.shutdown()


def bench_producer(work: Path, endpoint: str, total: int, rounds: int, moto_pid: int) -> dict[str, object]:
    """``rounds`` appends of ``total`` bytes while the offloader works through a backlog at
    OFFLOAD_RATE (paced by the offloader itself), against ``rounds`` without offload (half before,
    half after); the ratio is of the total times, so that the rounds with offload span several
    segments' uploads. CPU of the S3 server and of the upload process is taken over the rounds with
    offload, to tell what the producer competed with."""
    store = open_store(work, endpoint, "produce", offload_rate_bytes=OFFLOAD_RATE)
    try:
        fill(store, max(total, 256 << 20), 2)  # the backlog: lasts beyond the rounds with offload
        backlog = store.offloader.pending()
        without = [fill(store, total, 100 + r) for r in range(rounds // 2)]
        stop = threading.Event()
        uploaded = [0, 0.0]

        def offload() -> None:
            began = time.perf_counter()
            for mf in backlog:
                if stop.is_set():
                    break
                store.offloader._offload(mf)
                uploaded[0] += mf.file_size
            uploaded[1] = time.perf_counter() - began

        worker = store.upload_worker
        worker_pid = worker.pid if worker is not None else None
        thread = threading.Thread(target=offload)
        thread.start()
        time.sleep(0.05)
        cpu_before = (cpu_seconds(moto_pid), cpu_seconds(worker_pid), time.process_time())
        began = time.perf_counter()
        with_offload = [fill(store, total, 200 + r) for r in range(rounds)]
        wall = time.perf_counter() - began
        moto_cpu = cpu_seconds(moto_pid) - cpu_before[0]
        worker_cpu = cpu_seconds(worker_pid) - cpu_before[1]
        own_cpu = time.process_time() - cpu_before[2]
        stop.set()
        thread.join()
        without += [fill(store, total, 300 + r) for r in range(rounds - rounds // 2)]
        base_s = statistics.mean(without)
        with_s = statistics.mean(with_offload)
        return {
            "produce_mb_s_without_offload": round(total / base_s / 1e6, 1),
            "produce_mb_s_with_offload": round(total / with_s / 1e6, 1),
            "offload_mb_s": round(uploaded[0] / uploaded[1] / 1e6, 1) if uploaded[1] else 0.0,
            "producer_slowdown_ratio": round(with_s / base_s, 3),
            "producer_rounds": rounds,
            "producer_round_ratios": [round(w / base_s, 3) for w in with_offload],
            # cores' worth of CPU used during the rounds with offload
            "s3_server_cpu_cores_with_offload": round(moto_cpu / wall, 3),
            "upload_process_cpu_cores_with_offload": round(worker_cpu / wall, 3),
            "bench_process_cpu_cores_with_offload": round(own_cpu / wall, 3),
        }
    finally:
        store.shutdown()


def _probe(stop: threading.Event, late: list[float]) -> None:
    while not stop.is_set():
        began = time.perf_counter()
        time.sleep(0.001)
        late.append(time.perf_counter() - began - 0.001)


def gil_probe(work: Path, endpoint: str) -> dict[str, object]:
    """What offloading 4 segments costs the broker process, uploading from the upload process and
    from the offload thread: the offload thread's CPU per segment, and how late a thread sleeping
    1 ms at a time wakes up (it needs the GIL to wake; its lateness sums what it waited for)."""
    figures: dict[str, object] = {}
    for mode, upload_process in (("process", True), ("thread", False)):
        store = open_store(work, endpoint, f"gil-{mode}", upload_process=upload_process)
        try:
            fill(store, 5 * SEGMENT, 5)
            store.ensure_manifest()
            late: list[float] = []
            stop = threading.Event()
            thread = threading.Thread(target=_probe, args=(stop, late))
            thread.start()
            time.sleep(0.2)
            late.clear()
            cpu = time.thread_time()
            for mf in store.offloader.pending()[:4]:
                store.offloader._offload(mf)
            cpu = time.thread_time() - cpu
            stop.set()
            thread.join()
            late.sort()
            figures[f"{mode}_offload_thread_cpu_ms_per_segment"] = round(cpu * 1000 / 4, 1)
            figures[f"{mode}_probe_late_p99_ms"] = round(late[int(len(late) * 0.99)] * 1000, 2)
            figures[f"{mode}_probe_late_max_ms"] = round(late[-1] * 1000, 1)
        finally:
            store.shutdown()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB per phase instead of 512 MiB")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument(
        "--gil-probe", action="store_true", help="only the offload cost in the broker process"
    )
    args = parser.parse_args()
    total = (64 << 20) if args.quick else (512 << 20)
    work = Path(tempfile.mkdtemp(prefix="tiered-bench-", dir=args.dir))
    proc, endpoint = start_moto()
    try:
        figures: dict[str, object] = {"total_bytes_per_phase": total, "segment_bytes": SEGMENT}
        if args.gil_probe:
            figures = gil_probe(work, endpoint)
        else:
            figures |= bench_reads(work, endpoint, total)
            figures |= bench_producer(work, endpoint, total, 8 if args.quick else 2, proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    if os.environ.get("TIERED_BENCH_STRICT"):
        assert figures["verified"], "cold reads did not match"


if __name__ == "__main__":
    main()
