"""The write lease fences a master: once it runs out, no write is acknowledged, not even one its
replicas confirm. (The chaos test pauses a whole master; this pins the check itself.)"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from dataplane.ha.node import HANode, HANodeConfig
from dataplane.ha.service import ReplicaState
from dataplane.ha_writes import HaNotAvailable, after_put, before_put
from dataplane.store.message import AppendEntry, PutResult
from dataplane.store.status import PutMessageStatus
from mqcloud.ha.v1 import controller_pb2 as c

BATCH_END = 4096


def master(tmp_path: Path, lease_s: float) -> tuple[SimpleNamespace, ReplicaState]:
    """A broker whose HA node is master for ``lease_s`` more seconds, with one in-sync replica (n1)
    that has confirmed nothing yet."""
    config = HANodeConfig(
        group="g",
        node="n0",
        address="127.0.0.1:1",
        ha_listen="127.0.0.1:0",
        controllers=["127.0.0.1:1"],
        data_dir=tmp_path,
        key=b"k",
    )
    node = HANode(SimpleNamespace(max_physical_offset=BATCH_END), config)
    node.service._loop = asyncio.get_running_loop()  # what HAService.start sets
    node.role, node.lease_deadline = c.MASTER, time.monotonic() + lease_s
    node.sync_state_set = ["n0", "n1"]
    node.service.controller_sss = {"n1"}
    replica = node.service.replicas["n1"] = ReplicaState("n1", "127.0.0.1:2")
    replica.last_caught_up = time.monotonic()
    settings = SimpleNamespace(
        ha_ack_timeout_ms=2000, min_in_sync_replicas=2, min_in_sync_replicas_per_topic={}
    )
    return SimpleNamespace(ha=node, settings=settings), replica


def stored() -> PutResult:
    return PutResult(PutMessageStatus.PUT_OK, [AppendEntry(0, 0, 0, BATCH_END, "")])


async def confirmed_after(broker: SimpleNamespace, replica: ReplicaState, delay_s: float) -> PutResult:
    """after_put of one stored batch whose replica confirms it ``delay_s`` later."""
    waiting = asyncio.create_task(after_put(broker, stored(), replicas=1))  # type: ignore[arg-type]
    await asyncio.sleep(delay_s)
    assert not waiting.done()  # held until the replica confirms
    broker.ha.service._on_report(replica, BATCH_END)
    return await waiting


async def test_a_batch_confirmed_within_the_lease_is_acknowledged(tmp_path: Path) -> None:
    broker, replica = master(tmp_path, lease_s=60)
    assert before_put(broker, []) == 1  # type: ignore[arg-type]
    assert (await confirmed_after(broker, replica, 0.05)).status is PutMessageStatus.PUT_OK


async def test_a_batch_confirmed_after_the_lease_ran_out_is_refused(tmp_path: Path) -> None:
    # given a master whose lease runs out while it waits for its replica
    broker, replica = master(tmp_path, lease_s=0.05)
    assert before_put(broker, []) == 1  # type: ignore[arg-type]
    # when the replica confirms the batch after that
    result = await confirmed_after(broker, replica, 0.15)
    # then the write is refused: another node may be master by now
    assert result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    # and the next write is refused before it is stored
    with pytest.raises(HaNotAvailable, match="lease expired"):
        before_put(broker, [])  # type: ignore[arg-type]
