"""The embedded Celery transport publishes each message whole: a reader listing the queue folder
never finds a message file before all of its bytes are in it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection

from config import celery_transport


def _connection(folder: Path) -> Connection:
    options = {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "store_processed": False,
        "control_folder": str(folder / "control"),  # kombu's default is the working directory
        "polling_interval": 0.05,
    }
    transport = "config.celery_transport:Transport"
    return Connection("filesystem://", transport=transport, transport_options=options)


def test_a_message_appears_under_its_name_only_once_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen_at_rename: list[tuple[list[str], bytes]] = []
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        # what a worker listing the folder right before the rename would find: no message yet
        listed = [p.name for p in tmp_path.iterdir() if p.name.endswith(".msg")]
        seen_at_rename.append((listed, Path(src).read_bytes()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with _connection(tmp_path) as conn:
        assert isinstance(conn.transport, celery_transport.Transport)
        queue = conn.SimpleQueue("jobs")
        queue.put({"task": "provision", "n": 1})
        [(listed, written)] = seen_at_rename
        assert listed == []  # readers had nothing to take while it was being written
        # the whole message was in the file before it got its name
        assert json.loads(written)["properties"]["delivery_info"]["routing_key"] == "jobs"
        assert [p for p in tmp_path.iterdir() if p.name.endswith(".jobs.msg")]
        message = queue.get(timeout=1)  # kombu's own reader takes it
        assert message.payload == {"task": "provision", "n": 1}
        message.ack()
        queue.close()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
