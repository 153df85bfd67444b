"""broker_work times the broker's receive/ack handlers in-process: every message goes through once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import broker_work
from bench.broker_work import broker_send_figures, broker_work_figures


async def test_every_message_is_received_and_acked_once(tmp_path: Path) -> None:
    figures = await broker_work_figures(640, data_dir=tmp_path)
    assert figures["broker_work_in_flight_after"] == 0  # every receive's messages were acked
    for key in (
        "broker_receive_us_per_msg",
        "broker_ack_us_per_msg",
        "broker_trace_us_per_msg",
        "broker_receive_cold_us_per_msg",
        "broker_ack_cold_us_per_msg",
        "broker_receive_compiled_run_us_per_msg",
        "broker_receive_python_run_us_per_msg",
        "broker_receive_filtered_us_per_msg",
    ):
        assert 0 < figures[key] < 10_000, (key, figures[key])
    # measured (that the caller does not wait for the snapshot's fsync is test_pop_compaction's)
    assert 0 < figures["broker_pop_compaction_ms"] < 1_000
    # (that unchanged positions are not serialized again is test_pop_compaction's; times are the bench's)
    assert figures["broker_pop_compaction_unchanged_ms"] > 0
    # the store still holds what was consumed: the harness leaves a given directory in place
    assert (tmp_path / "store").is_dir()


async def test_the_send_figures_time_sends_that_were_stored() -> None:
    # broker_send_figures raises when the store does not hold every message sent (warm-up included)
    figures = await broker_send_figures(4000)  # enough calls that first touches of new files average out
    assert set(figures) == {
        "broker_send_us_per_call",
        "broker_send_batched_us_per_msg",
        "broker_send_cold_us_per_call",
        "broker_store_put_us_per_msg",
        "broker_store_put_cold_us_per_msg",
        "broker_send_unguarded_us_per_call",
        "broker_send_guard_us_per_call",
    }
    assert 0 < figures["broker_send_batched_us_per_msg"] < figures["broker_send_us_per_call"] < 100_000
    # the same calls with the caches evicted before each cost more: the evictor does evict
    assert figures["broker_send_us_per_call"] < figures["broker_send_cold_us_per_call"] < 100_000, figures
    # the store's put is part of a send (back to back, the steadier figure), and costs more cold
    assert 0 < figures["broker_store_put_us_per_msg"] < figures["broker_send_us_per_call"], figures
    assert figures["broker_store_put_us_per_msg"] < figures["broker_store_put_cold_us_per_msg"], figures
    # the guard's part (a difference of rounds: below zero only when noise outweighs it) is less
    # than the whole send
    assert 0 < figures["broker_send_unguarded_us_per_call"] < 100_000, figures
    assert figures["broker_send_guard_us_per_call"] < figures["broker_send_us_per_call"], figures


async def test_the_unguarded_sends_skip_admission_and_metering_only(monkeypatch: pytest.MonkeyPatch) -> None:
    admitted: list[str] = []
    real_admit = broker_work.Guard.admit

    def admit(self: broker_work.Guard, rpc: str, *args: object, **kwargs: object) -> object:
        admitted.append(rpc)
        return real_admit(self, rpc, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(broker_work.Guard, "admit", admit)
    async with broker_work._send_broker() as broker:  # the broker the send figures run on
        figures = await broker_work._guard_rounds(broker, 40)
    # each round's guarded run admits its calls and its warm-up's (a tenth more), its unguarded run
    # none; both stored every message (_send_us raises otherwise)
    assert admitted == ["SendMessage"] * (broker_work.GUARD_ROUNDS * 44)
    assert set(figures) == {"broker_send_unguarded_us_per_call", "broker_send_guard_us_per_call"}


def test_the_evictor_copies_more_than_the_cores_l2_cache() -> None:
    l2 = os.sysconf("SC_LEVEL2_CACHE_SIZE") if "SC_LEVEL2_CACHE_SIZE" in os.sysconf_names else 0
    assert broker_work.CacheEvictor().size >= max(8 << 20, 4 * l2)


async def test_a_run_in_a_directory_of_its_own_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = tmp_path / "own"
    monkeypatch.setattr(broker_work.tempfile, "mkdtemp", lambda prefix: str(own.mkdir() or own))
    figures = await broker_work_figures(64)
    assert figures["broker_pop_compaction_ms"] > 0
    assert not own.exists()
