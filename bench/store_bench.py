"""Storage engine benchmark: append, read, group commit and recovery against the disk's own rate.

    uv run python bench/store_bench.py [--quick] [--json PATH] [--dir DIR]

Figures (see docs/benchmarks.md for targets): disk_write_mb_s (sequential buffered pwrite of the same
segment-file pattern), append_async_msgs_per_s / append_mb_s / append_vs_disk_ratio (ASYNC_FLUSH,
batches of 128 x 1 KiB, one process), read_msgs_per_s (batches of 32 from the page cache),
sync_group_commit_ratio (64 SYNC_FLUSH writers over one; the median of alternating rounds; the
disk and append runs alternate too, and append_vs_disk_ratio is the median of the paired ratios),
recovery_s_per_gib (full scan after SIGKILL, checkpoint removed; --quick scans a smaller log and
scales linearly), replica_apply_msgs_per_s / replica_apply_vs_append_ratio (an HA replica applying a
master's log, ``append_raw`` of 1 MiB chunks of indexed messages, over the master's append of them),
encode_compiled_us_per_msg / encode_python_us_per_msg (the two CommitLog encoders alone on the append
batches, no write), append_batch_us.{total,encode,write,dispatch,rest} (where one
append batch's time goes: a separate run with those three steps timed, so it adds its own overhead to
"rest" and is not the timed append run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataplane.store import (
    FlushDiskType,
    MessageStore,
    MessageStoreConfig,
    MessageToStore,
    PutMessageStatus,
    commit_log,
    dispatch,
    mapped_file,
)
from dataplane.store.record import HEADER_SIZE, compiled_encode_batch, python_encode_batch

TOPIC = "bench%topic"
QUEUES = 8
BATCH = 128
BODY = b"x" * 1024
SEGMENT = 1 << 30
ROUNDS = 3  # disk and append runs, alternating; the figures are medians
RECORD_SIZE = HEADER_SIZE + len(BODY) + 2 + len(TOPIC) + 2  # one appended record, no properties


def _config(path: Path, **kw: object) -> MessageStoreConfig:
    return MessageStoreConfig(path, mapped_file_size_commit_log=SEGMENT, **kw)  # type: ignore[arg-type]


def _batches(props: dict[str, str] | None = None) -> list[list[MessageToStore]]:
    return [
        [MessageToStore(TOPIC, (b * BATCH + i) % QUEUES, BODY, dict(props or {})) for i in range(BATCH)]
        for b in range(4)
    ]


def bench_disk(work: Path, total_bytes: int, chunk: int) -> float:
    """MB/s of sequential buffered pwrite into preallocated 1 GiB segment files (no fsync)."""
    directory = work / "disk"
    directory.mkdir()
    data = os.urandom(chunk)
    written = 0
    began = time.perf_counter()
    segment = 0
    while written < total_bytes:
        fd = os.open(directory / f"{segment * SEGMENT:020d}", os.O_RDWR | os.O_CREAT, 0o644)
        os.posix_fallocate(fd, 0, SEGMENT)
        pos = 0
        while pos + chunk <= SEGMENT and written < total_bytes:
            os.pwrite(fd, data, pos)
            pos += chunk
            written += chunk
        os.close(fd)
        segment += 1
    elapsed = time.perf_counter() - began
    shutil.rmtree(directory)
    return written / elapsed / 1e6


def bench_append_and_read(work: Path, count: int, props: dict[str, str] | None) -> dict[str, float]:
    directory = work / ("append-props" if props else "append")
    store = MessageStore(_config(directory))
    store.start()
    batches = _batches(props)
    began = time.perf_counter()
    for i in range(count // BATCH):
        result = store.put_messages(batches[i % 4])
        assert result.status is PutMessageStatus.PUT_OK
    elapsed = time.perf_counter() - began
    appended = count // BATCH * BATCH
    out = {"msgs_per_s": appended / elapsed, "mb_s": store.max_physical_offset / elapsed / 1e6}
    if not props:
        read = 0
        began = time.perf_counter()
        for qid in range(QUEUES):
            offset = 0
            while True:
                got = store.get_messages(TOPIC, qid, offset, max_count=32)
                if not got.messages:
                    break
                read += len(got.messages)
                offset = got.next_begin_offset
        out["read_msgs_per_s"] = read / (time.perf_counter() - began)
        assert read == appended
    store.shutdown()
    shutil.rmtree(directory)
    return out


def bench_replica_apply(work: Path, count: int) -> dict[str, float]:
    """An HA replica's side: a master appends ``count`` indexed messages (UNIQ_KEY+TAGS, batches of
    BATCH), then a second store applies the master's log as a replica does, ``MessageStore.append_raw``
    of 1 MiB chunks (the HA DATA frame's size); only the appends and the applies are timed."""
    master = MessageStore(_config(work / "replica-master"))
    replica = MessageStore(_config(work / "replica"))
    master.start()
    replica.start()
    try:
        batches = _batches({"UNIQ_KEY": "0A0B0C0D0E0F", "TAGS": "TagA"})
        began = time.perf_counter()
        for i in range(count // BATCH):
            assert master.put_messages(batches[i % 4]).status is PutMessageStatus.PUT_OK
        appended = time.perf_counter() - began
        applied, offset = 0.0, 0
        while offset < master.max_physical_offset:
            data = master.read_commit_log(offset, 1 << 20)
            began = time.perf_counter()
            replica.append_raw(offset, data)
            applied += time.perf_counter() - began
            offset += len(data)
        assert replica.max_physical_offset == master.max_physical_offset
        messages = count // BATCH * BATCH
        return {"append_msgs_per_s": messages / appended, "apply_msgs_per_s": messages / applied}
    finally:
        master.shutdown()
        replica.shutdown()
        shutil.rmtree(work / "replica-master")
        shutil.rmtree(work / "replica")


def bench_encoders(rounds: int = 200) -> dict[str, float]:
    """Microseconds per message of the two CommitLog encoders alone (no write), on the append batches."""
    batches = _batches()
    host = (b"\x7f\x00\x00\x01", 10911)
    out = {}
    for name, encode in (("compiled", compiled_encode_batch), ("python", python_encode_batch)):
        if encode is None:
            continue
        began = time.perf_counter()
        for i in range(rounds):
            encode(batches[i % 4], 0, 0, SEGMENT, 1, host, {}, 1 << 22, "PREFIX")
        out[f"encode_{name}_us_per_msg"] = (time.perf_counter() - began) / (rounds * BATCH) * 1e6
    return out


@contextmanager
def _timed(owner: Any, name: str, totals: dict[str, float], key: str) -> Iterator[None]:
    """Add the time spent in ``owner.name`` to ``totals[key]`` while the block runs."""
    original: Callable[..., Any] = getattr(owner, name)
    clock = time.perf_counter

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = clock()
        try:
            return original(*args, **kwargs)
        finally:
            totals[key] += clock() - began

    setattr(owner, name, timed)
    try:
        yield
    finally:
        setattr(owner, name, original)


def bench_append_split(work: Path, count: int) -> dict[str, float]:
    """Microseconds per append batch: the whole put, the encoder, the write and the dispatch."""
    directory = work / "append-split"
    store = MessageStore(_config(directory))
    store.start()
    batches = _batches()
    totals = {"encode": 0.0, "write": 0.0, "dispatch": 0.0}
    rounds = count // BATCH
    with (
        _timed(commit_log, "encode_batch", totals, "encode"),
        _timed(mapped_file.MappedFile, "write_head_last", totals, "write"),
        _timed(dispatch.CommitLogDispatcher, "dispatch_batch", totals, "dispatch"),
    ):
        began = time.perf_counter()
        for i in range(rounds):
            store.put_messages(batches[i % 4])
        elapsed = time.perf_counter() - began
    store.shutdown()
    shutil.rmtree(directory)
    split = {key: value / rounds * 1e6 for key, value in totals.items()}
    split["total"] = elapsed / rounds * 1e6
    split["rest"] = split["total"] - split["encode"] - split["write"] - split["dispatch"]
    return split


def _sync_rate(store: MessageStore, writers: int, seconds: float) -> float:
    stop = time.monotonic() + seconds
    counts = [0] * writers
    batch = [MessageToStore(TOPIC, 0, BODY)]

    def run(index: int) -> None:
        while time.monotonic() < stop:
            assert store.put_messages(batch).status is PutMessageStatus.PUT_OK
            counts[index] += 1

    began = time.perf_counter()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - began)


async def _async_rate(store: MessageStore, writers: int, seconds: float) -> float:
    stop = time.monotonic() + seconds
    count = 0
    batch = [MessageToStore(TOPIC, 0, BODY)]

    async def run() -> None:
        nonlocal count
        while time.monotonic() < stop:
            assert (await store.put_messages_async(batch)).status is PutMessageStatus.PUT_OK
            count += 1

    began = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(writers)))
    return count / (time.perf_counter() - began)


def bench_group_commit(work: Path, seconds: float, rounds: int = 4) -> dict[str, float]:
    """One writer (put + wait for its fsync) against 64 concurrent writers sharing fsyncs.

    The three phases alternate in ``rounds`` short rounds and each figure is the median over them,
    so a change in fsync latency (other I/O on a shared disk) hits both sides of the ratio alike.
    """
    directory = work / "sync"
    # write back what earlier phases left dirty, or it inflates every fsync measured here
    os.sync()
    store = MessageStore(_config(directory, flush_disk_type=FlushDiskType.SYNC_FLUSH))
    store.start()
    step = seconds / rounds
    ones, tasks, threads = [], [], []
    for _ in range(rounds):
        ones.append(_sync_rate(store, 1, step))
        tasks.append(asyncio.run(_async_rate(store, 64, step)))
        threads.append(_sync_rate(store, 64, step))
    store.shutdown()
    shutil.rmtree(directory)
    return {
        "sync_1_writer_msgs_per_s": statistics.median(ones),
        "sync_64_threads_msgs_per_s": statistics.median(threads),
        "sync_64_tasks_msgs_per_s": statistics.median(tasks),
        "ratio": statistics.median(t / o for t, o in zip(tasks, ones, strict=True)),
        "ratio_threads": statistics.median(t / o for t, o in zip(threads, ones, strict=True)),
    }


def writer_main(directory: Path, total_bytes: int) -> None:
    """Child process for the recovery bench: fill the log, report, then wait to be SIGKILLed."""
    store = MessageStore(_config(directory, flush_consume_queue_interval_ms=3_600_000))
    store.start()
    batches = _batches({"UNIQ_KEY": "0" * 32})
    i = 0
    while store.max_physical_offset < total_bytes:
        store.put_messages(batches[i % 4])
        i += 1
    print(store.max_physical_offset, flush=True)
    time.sleep(3600)


def bench_recovery(work: Path, total_bytes: int) -> dict[str, float]:
    directory = work / "recovery"
    proc = subprocess.Popen(
        [sys.executable, __file__, "--writer", str(directory), "--bytes", str(total_bytes)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    size = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    (directory / "checkpoint").unlink(missing_ok=True)
    store = MessageStore(_config(directory))
    began = time.perf_counter()
    store.start()
    full = time.perf_counter() - began
    assert store.max_physical_offset == size
    store.shutdown()
    store = MessageStore(_config(directory))
    began = time.perf_counter()
    store.start()
    clean = time.perf_counter() - began
    store.shutdown()
    shutil.rmtree(directory)
    return {
        "log_bytes": size,
        "full_scan_s": full,
        "s_per_gib": full * (1 << 30) / size,
        "clean_restart_s": clean,
    }


def machine() -> dict[str, str]:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        lscpu = ""
    return {"nproc": str(os.cpu_count()), "lscpu": "\n".join(lscpu.splitlines()[:10]), "python": sys.version}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, finishes within 60 s")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--dir", type=Path, help="work directory (default: the system temp dir)")
    parser.add_argument("--writer", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        writer_main(args.writer, args.bytes)
        return
    count = 300_000 if args.quick else 1_000_000
    recovery_bytes = (256 << 20) if args.quick else (1 << 30)
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="store-bench-", dir=args.dir))
    try:
        # The disk and the store take turns, round after round, and each ratio pairs the runs next to
        # each other: on a shared machine the page cache's speed moves by half within a minute.
        disks, plains = [], []
        for _ in range(ROUNDS):
            disks.append(bench_disk(work, count * RECORD_SIZE, BATCH * RECORD_SIZE))
            plains.append(bench_append_and_read(work, count, None))
        disk = statistics.median(disks)
        plain = {key: statistics.median(p[key] for p in plains) for key in plains[0]}
        ratio = statistics.median(p["mb_s"] / d for p, d in zip(plains, disks, strict=True))
        disk_rounds = ", ".join(f"{d:,.0f}" for d in disks)
        append_rounds = ", ".join(f"{p['mb_s']:,.0f}" for p in plains)
        print(f"disk sequential buffered write: {disk:,.0f} MB/s (rounds: {disk_rounds})")
        print(
            f"append ASYNC_FLUSH: {plain['msgs_per_s']:,.0f} msgs/s, {plain['mb_s']:,.0f} MB/s "
            f"(rounds: {append_rounds})"
        )
        print(f"read by queue offset: {plain['read_msgs_per_s']:,.0f} msgs/s")
        encoders = bench_encoders()
        print("encoders alone: " + ", ".join(f"{k} {v:.3f}" for k, v in encoders.items()))
        split = bench_append_split(work, count // 2)
        print("one append batch, us: " + ", ".join(f"{k} {v:.1f}" for k, v in split.items()))
        with_props = bench_append_and_read(work, count // 3, {"UNIQ_KEY": "0A0B0C0D0E0F", "TAGS": "TagA"})
        print(f"append with UNIQ_KEY+TAGS (indexed): {with_props['msgs_per_s']:,.0f} msgs/s")
        replica = bench_replica_apply(work, count // 3)
        print(
            f"replica apply (append_raw of 1 MiB chunks, indexed): {replica['apply_msgs_per_s']:,.0f} "
            "msgs/s, "
            f"the master's append of the same {replica['append_msgs_per_s']:,.0f} msgs/s"
        )
        group = bench_group_commit(work, 2.0 if args.quick else 5.0)
        print(
            f"SYNC_FLUSH: 1 writer {group['sync_1_writer_msgs_per_s']:,.0f} msgs/s; 64 asyncio writers "
            f"{group['sync_64_tasks_msgs_per_s']:,.0f} msgs/s (ratio {group['ratio']:.1f}); 64 threads "
            f"{group['sync_64_threads_msgs_per_s']:,.0f} msgs/s (ratio {group['ratio_threads']:.1f})"
        )
        recovery = bench_recovery(work, recovery_bytes)
        scaled = " (scaled from a smaller log)" if recovery_bytes < (1 << 30) else ""
        print(
            f"recovery after SIGKILL, full scan of {recovery['log_bytes'] / 2**20:.0f} MiB: "
            f"{recovery['full_scan_s']:.2f} s = {recovery['s_per_gib']:.2f} s/GiB{scaled}; "
            f"clean restart {recovery['clean_restart_s']:.3f} s"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures = {
        "mode": "quick" if args.quick else "full",
        "disk_write_mb_s": disk,
        "append_async_msgs_per_s": plain["msgs_per_s"],
        "append_mb_s": plain["mb_s"],
        "append_vs_disk_ratio": ratio,
        "append_vs_disk_ratio_rounds": [p["mb_s"] / d for p, d in zip(plains, disks, strict=True)],
        **encoders,
        "append_batch_us": split,
        "append_async_indexed_msgs_per_s": with_props["msgs_per_s"],
        "read_msgs_per_s": plain["read_msgs_per_s"],
        "replica_apply_msgs_per_s": replica["apply_msgs_per_s"],
        "replica_apply_vs_append_ratio": replica["apply_msgs_per_s"] / replica["append_msgs_per_s"],
        "sync_1_writer_msgs_per_s": group["sync_1_writer_msgs_per_s"],
        "sync_64_tasks_msgs_per_s": group["sync_64_tasks_msgs_per_s"],
        "sync_64_threads_msgs_per_s": group["sync_64_threads_msgs_per_s"],
        "sync_group_commit_ratio": group["ratio"],
        "sync_group_commit_ratio_threads": group["ratio_threads"],
        "recovery_log_bytes": recovery["log_bytes"],
        "recovery_full_scan_s": recovery["full_scan_s"],
        "recovery_s_per_gib": recovery["s_per_gib"],
        "recovery_scaled": bool(scaled),
        "clean_restart_s": recovery["clean_restart_s"],
        "machine": machine(),
    }
    print(f"append/disk ratio: {figures['append_vs_disk_ratio']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
