"""The metering journal and checkpoint: recovery after a crash counts everything exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dataplane.metering import JOURNAL_DIR, LagSample, UsageMeter

NOW = 1_700_000_010.0


def latest(outbox: Path) -> dict[str, dict[str, Any]]:
    kept: dict[str, dict[str, Any]] = {}
    for path in outbox.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["id"] not in kept or record["written_at"] > kept[record["id"]]["written_at"]:
                kept[record["id"]] = record
    return kept


def test_a_crash_after_a_checkpoint_replays_only_what_followed_it(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    meter = UsageMeter(outbox, "b0", tmp_path, clock=lambda: NOW)
    meter.count_in("acme", [100, 5000])
    meter.count_call("acme", "SendMessage")
    meter.flush()  # checkpoint: 2 messages
    meter.count_in("acme", [7])
    meter.count_out("acme", [100])
    meter.add_lag([LagSample("acme", "acme%g", "acme%t", 0, 3, 10, 1, 5, 8)])
    # the process dies here: no flush, no close
    recovered = UsageMeter(outbox, "b0", tmp_path, clock=lambda: NOW + 1)
    assert recovered.recovered == 3
    recovered.flush()
    records = latest(outbox)
    usage = next(r for r in records.values() if r["kind"] == "usage")
    assert (usage["messages_in"], usage["bytes_in"], usage["requests_in_4k"]) == (3, 5107, 1 + 2 + 1)
    assert (usage["messages_out"], usage["bytes_out"]) == (1, 100)
    assert usage["api_calls"] == {"SendMessage": 1}
    assert [r["lag_messages"] for r in records.values() if r["kind"] == "lag"] == [3]
    # the replayed segments are gone once a checkpoint covers them
    assert [p.stat().st_size for p in (tmp_path / JOURNAL_DIR).glob("*.log")] in ([], [0])


def test_a_torn_or_corrupt_tail_is_dropped_and_the_rest_recovered(tmp_path: Path) -> None:
    meter = UsageMeter(tmp_path / "outbox", "b0", tmp_path, clock=lambda: NOW)
    meter.count_in("acme", [10])
    meter.count_in("acme", [20])
    segment = next((tmp_path / JOURNAL_DIR).glob("*.log"))
    lines = segment.read_bytes().splitlines(keepends=True)
    flipped = lines[1].replace(b"20", b"99")  # a CRC mismatch
    segment.write_bytes(lines[0] + flipped + b'0badc0de ["c","acme"')
    recovered = UsageMeter(tmp_path / "outbox", "b0", tmp_path, clock=lambda: NOW)
    assert recovered.recovered == 1
    recovered.count_in("acme", [5])  # goes to a new segment, never after the torn tail
    recovered.flush()
    usage = next(iter(latest(tmp_path / "outbox").values()))
    assert (usage["messages_in"], usage["bytes_in"]) == (2, 15)


def test_a_failed_write_keeps_the_counts_for_the_next_checkpoint(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    meter = UsageMeter(outbox, "b0", tmp_path, clock=lambda: NOW)
    meter.count_in("acme", [10])
    outbox.mkdir()
    (outbox / "usage").write_text("not a directory")  # the file write fails
    records, state = meter.snapshot()
    try:
        meter.write(records, state)
        raise AssertionError("the write should have failed")
    except OSError:
        meter.requeue(records)
    (outbox / "usage").unlink()
    meter.count_in("acme", [20])
    # a crash now: the state written before the failure plus the journal after it give the total
    recovered = UsageMeter(outbox, "b0", tmp_path, clock=lambda: NOW)
    recovered.flush()
    usage = next(iter(latest(outbox).values()))
    assert (usage["messages_in"], usage["bytes_in"]) == (2, 30)


def test_nodes_of_one_ha_group_write_their_own_ids_and_files(tmp_path: Path) -> None:
    # the master counts part of a minute, fails over, and the new master counts the rest
    old = UsageMeter(tmp_path / "outbox", "group-a", tmp_path / "n1", clock=lambda: NOW, node="10.0.0.1:8081")
    new = UsageMeter(
        tmp_path / "outbox", "group-a", tmp_path / "n2", clock=lambda: NOW + 5, node="10.0.0.2:8081"
    )
    old.count_in("acme", [10, 10])
    new.count_in("acme", [10])
    paths = old.flush() + new.flush()
    assert len({p.name for p in paths}) == 2
    assert all(p.name.startswith("group-a.10.0.0.") for p in paths)
    usage = [r for r in latest(tmp_path / "outbox").values() if r["kind"] == "usage"]
    assert sorted(r["messages_in"] for r in usage) == [1, 2]  # both totals survive de-duplication
    assert {r["broker"] for r in usage} == {"group-a"}
    # a standalone broker keeps the plain broker name
    solo = UsageMeter(tmp_path / "solo", "broker-0", tmp_path / "n3", clock=lambda: NOW)
    solo.count_call("acme", "SendMessage")
    assert solo.flush()[0].name.startswith("broker-0-")


def test_a_rewrite_after_a_restart_wins_even_if_the_clock_went_back(tmp_path: Path) -> None:
    meter = UsageMeter(tmp_path / "outbox", "b0", tmp_path, clock=lambda: NOW)
    meter.count_in("acme", [10])
    meter.flush()
    meter.close()
    # the restarted broker's clock is 5 s behind (the same minute); it adds to that minute
    behind = UsageMeter(tmp_path / "outbox", "b0", tmp_path, clock=lambda: NOW - 5)
    behind.count_in("acme", [20])
    behind.flush()
    usage = next(iter(latest(tmp_path / "outbox").values()))
    assert (usage["messages_in"], usage["bytes_in"]) == (2, 30)
