"""Disk faults on a real broker: a full disk, then a damaged CommitLog found at start-up.

The full disk is a small tmpfs mounted by the test (the tests run as root, as in CI); nothing else
on the machine fills up.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.conftest import free_port
from tests.integration.broker.conftest import V2, BrokerProcess, messages

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEGMENT = 1 << 20
DISK = 24 << 20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"the disk-full test mounts a tmpfs and needs root: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(path: Path, leave: int) -> None:
    """Write a filler file until only ``leave`` bytes are free."""
    st = os.statvfs(path.parent)
    free = st.f_bavail * st.f_frsize
    with open(path, "wb") as f:
        f.write(b"\xff" * max(0, free - leave))


def _send_until_refused(v2: V2, topic: str, body: bytes, limit: int) -> tuple[list[str], pb.Status]:
    acked: list[str] = []
    for i in range(limit):
        reply = v2.send(topic, body=body + i.to_bytes(4, "big"))
        status = reply.entries[0].status if reply.entries else reply.status
        if status.code != pb.Code.OK:
            return acked, status
        acked.append(reply.entries[0].message_id)
    raise AssertionError(f"{limit} sends all succeeded on a full disk")


def test_full_disk_refuses_produce_clearly_and_recovers(small_disk: Path) -> None:
    broker = BrokerProcess(
        small_disk / "broker",
        free_port(),
        env={
            "MQ_BROKER_COMMIT_LOG_SEGMENT_BYTES": str(SEGMENT),
            "MQ_BROKER_DISK_FULL_RATIO": "0.99",
            "MQ_BROKER_DISK_MIN_FREE_BYTES": str(2 << 20),
        },
    )
    broker.start()
    admin = BrokerAdminClient(broker.target)
    v2 = V2(broker.target, namespace="acme")
    try:
        admin.create_topic("disk", namespace="acme", queue_count=1)
        admin.create_group("g", namespace="acme")
        body = os.urandom(60_000)
        first = [v2.send("disk", body=body + i.to_bytes(4, "big")) for i in range(3)]
        assert all(r.entries[0].status.code == pb.Code.OK for r in first)
        filler = small_disk / "filler"
        _fill(filler, leave=3 * SEGMENT // 2)
        acked, refused = _send_until_refused(v2, "disk", body, limit=400)
        # a clear, retryable refusal that says why, not an opaque internal error
        assert refused.code == pb.Code.INTERNAL_SERVER_ERROR
        assert "disk" in refused.message.lower() and "full" in refused.message.lower(), refused.message
        # still refused while full, and the broker stays up
        again = v2.send("disk", body=b"x").entries[0].status
        assert again.code != pb.Code.OK and broker.proc is not None and broker.proc.poll() is None
        filler.unlink()  # space returns
        deadline = time.monotonic() + 15
        while True:
            reply = v2.send("disk", body=b"after")
            if reply.entries[0].status.code == pb.Code.OK:
                break
            assert time.monotonic() < deadline, reply.entries[0].status.message
            time.sleep(0.2)
        # every acknowledged message is there, byte for byte, in order
        expected = [body + i.to_bytes(4, "big") for i in range(3)]
        expected += [body + i.to_bytes(4, "big") for i in range(len(acked))]
        expected.append(b"after")
        got: list[bytes] = []
        for _ in range(60):
            batch = messages(v2.receive("g", "disk", batch=32, poll_s=1))
            for m in batch:
                got.append(m.body)
                v2.ack("g", "disk", m)
            if len(got) >= len(expected):
                break
        pairs = zip(got, expected, strict=False)
        first_diff = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(got), len(expected)))
        assert got == expected, f"{len(got)} received, {len(expected)} expected; differ from {first_diff}"
        # and after a restart too
        broker.stop()
        broker.start()
        assert admin.list_topics(namespace="acme")
        stats = admin.topic_stats("acme%disk")
        assert stats.queues[0].max_offset == len(expected)
    finally:
        v2.close()
        admin.close()
        broker.kill()


def test_bit_flipped_commitlog_is_reported_at_start_and_the_rest_served(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", free_port())
    broker.start()
    admin = BrokerAdminClient(broker.target)
    v2 = V2(broker.target, namespace="acme")
    try:
        admin.create_topic("flip", namespace="acme", queue_count=1)
        admin.create_group("g", namespace="acme")
        bodies = [f"message {i} ".encode() * 20 for i in range(10)]
        for body in bodies:
            assert v2.send("flip", body=body).entries[0].status.code == pb.Code.OK
        broker.stop()  # clean stop: the checkpoint covers everything
        segment = sorted((tmp_path / "broker" / "store" / "commitlog").iterdir())[0]
        data = bytearray(segment.read_bytes()[: 1 << 20])
        at = data.find(b"message 4 ")
        assert at > 0
        with open(segment, "r+b") as f:
            f.seek(at)
            f.write(b"MESSAGE")
        broker.start()
        log = "".join(broker.output)
        assert "dropped data" in log and "corrupt records" in log, log
        report = (tmp_path / "broker" / "store" / "recovery-report.json").read_text()
        assert '"corrupt_records": [' in report
        got = [m.body for m in messages(v2.receive("g", "flip", batch=32, poll_s=1))]
        assert got == bodies[:4] + bodies[5:]
    finally:
        v2.close()
        admin.close()
        broker.kill()
