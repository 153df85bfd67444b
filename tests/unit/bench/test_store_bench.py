"""bench/store_bench.py's append split: every part measured, and the store's functions put back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.store_bench import bench_append_split
from dataplane.store import commit_log, dispatch, mapped_file


def _timed_steps() -> tuple[Any, ...]:
    return (
        commit_log.encode_batch,
        mapped_file.MappedFile.write_head_last,
        dispatch.CommitLogDispatcher.dispatch_batch,
    )


def test_the_append_split_times_each_step_and_restores_them(tmp_path: Path) -> None:
    originals = _timed_steps()
    split = bench_append_split(tmp_path, 128 * 20)
    assert set(split) == {"encode", "write", "dispatch", "total", "rest"}
    assert all(split[key] > 0 for key in ("encode", "write", "dispatch", "rest"))
    # the steps run inside the put, one after the other: together they fit in its time
    assert split["total"] > split["encode"] + split["write"] + split["dispatch"]
    assert _timed_steps() == originals
    assert not (tmp_path / "append-split").exists()
