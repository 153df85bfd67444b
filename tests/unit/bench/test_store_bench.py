"""bench/store_bench.py's append split: every part measured, and the store's functions put back."""

from __future__ import annotations

from pathlib import Path

from bench.store_bench import bench_append_split
from dataplane.store import commit_log, dispatch, mapped_file


def test_the_append_split_times_each_step_and_restores_them(tmp_path: Path) -> None:
    originals = (
        commit_log.encode_batch,
        mapped_file.MappedFile.write_pieces,
        dispatch.CommitLogDispatcher.dispatch_batch,
    )
    split = bench_append_split(tmp_path, 128 * 20)
    assert set(split) == {"encode", "write", "dispatch", "total", "rest"}
    assert all(split[key] > 0 for key in ("encode", "write", "dispatch", "total"))
    assert split["total"] > split["encode"] + split["write"] + split["dispatch"]
    assert abs(split["total"] - split["encode"] - split["write"] - split["dispatch"] - split["rest"]) < 1e-6
    assert (
        commit_log.encode_batch,
        mapped_file.MappedFile.write_pieces,
        dispatch.CommitLogDispatcher.dispatch_batch,
    ) == originals
    assert not (tmp_path / "append-split").exists()
