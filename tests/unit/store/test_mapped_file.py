"""MappedFile.write_head_last: a CommitLog run lands whole, its first 4 bytes (TOTALSIZE) last, or
in one pwrite when it lies within one page."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dataplane.store.mapped_file import MappedFile, segment_name

SIZE = 1 << 16


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[MappedFile]:
    mf = MappedFile(tmp_path / segment_name(0), SIZE)
    yield mf
    mf.close()


def _record_pwrites(monkeypatch: pytest.MonkeyPatch, short_first: bool = False) -> list[tuple[int, int]]:
    """Every pwrite/pwritev as (position, bytes asked); with ``short_first`` the first writes half."""
    calls: list[tuple[int, int]] = []
    real_pwrite, real_pwritev = os.pwrite, os.pwritev

    def pwrite(fd: int, data: Any, position: int) -> int:
        calls.append((position, len(data)))
        if short_first and len(calls) == 1:
            return real_pwrite(fd, memoryview(data)[: len(data) // 2], position)
        return real_pwrite(fd, data, position)

    def pwritev(fd: int, buffers: Any, position: int) -> int:
        calls.append((position, sum(len(b) for b in buffers)))
        return real_pwritev(fd, buffers, position)

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "pwritev", pwritev)
    return calls


@pytest.mark.parametrize("short_first", [False, True])
def test_one_buffer_is_written_whole_with_its_head_last(
    segment: MappedFile, monkeypatch: pytest.MonkeyPatch, short_first: bool
) -> None:
    data = bytearray(os.urandom(5000))
    calls = _record_pwrites(monkeypatch, short_first)
    segment.write_head_last(100, [data], len(data))
    assert calls[-1] == (100, 4)  # TOTALSIZE after everything else
    assert all(position > 100 for position, _ in calls[:-1])
    assert segment.read(100, len(data)) == bytes(data)
    assert segment.read(96, 4) == b"\0" * 4 and segment.read(5100, 4) == b"\0" * 4


def test_a_run_within_one_page_is_one_pwrite(segment: MappedFile, monkeypatch: pytest.MonkeyPatch) -> None:
    # given: a single 1 KiB message's record, inside the second page, and one that crosses into the third
    small, crossing = bytearray(os.urandom(1000)), bytearray(os.urandom(1000))
    calls = _record_pwrites(monkeypatch)
    # when
    segment.write_head_last(4096 + 100, [small], len(small))
    segment.write_head_last(8192 - 500, [crossing], len(crossing))
    # then: the first is one write, head included; the second keeps its head for last
    assert calls[0] == (4196, 1000)
    assert calls[1:] == [(8192 - 496, 996), (8192 - 500, 4)]
    assert segment.read(4196, 1000) == bytes(small) and segment.read(7692, 1000) == bytes(crossing)


def test_a_short_write_within_a_page_falls_back_to_the_head_last(
    segment: MappedFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytearray(os.urandom(1000))
    calls = _record_pwrites(monkeypatch, short_first=True)
    segment.write_head_last(100, [data], len(data))
    # the half written first had its head zeroed before the rest, and the head went last
    assert calls[:2] == [(100, 1000), (100, 4)]
    assert calls[-1] == (100, 4) and all(position > 100 for position, _ in calls[2:-1])
    assert segment.read(100, len(data)) == bytes(data)


def test_several_pieces_are_written_back_to_back_with_the_head_last(
    segment: MappedFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieces: list[bytes | bytearray | memoryview] = [os.urandom(300), os.urandom(1000), os.urandom(7)]
    expected = b"".join(bytes(p) for p in pieces)
    calls = _record_pwrites(monkeypatch)
    segment.write_head_last(0, pieces, len(expected))
    assert calls[-1] == (0, 4)
    assert segment.read(0, len(expected)) == expected
