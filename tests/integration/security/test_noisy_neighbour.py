"""One tenant saturating its produce quota does not raise another tenant's latency by more than 20%.

The noisy tenant runs in its own process at about three times its quota (so it is refused most of
the time); the quiet tenant sends one message at a time from this process. Quiet phases and noisy
phases alternate, and the medians of each kind are compared, so background load on the machine
affects both sides alike.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from tests.integration.broker.conftest import REPO_ROOT, BrokerProcess

from .conftest import client, tenant

# serial: another test running beside it on the 2 cores would slow one phase and not the other
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.serial]

NOISY = """
import json, sys, time
from tests.integration.broker.conftest import V2
target, ak, secret = sys.argv[1:4]
seconds, rate = float(sys.argv[4]), float(sys.argv[5])
v2 = V2(target, namespace="noisy", credentials=(ak, secret))
codes = {}
start = time.monotonic()
n = 0
while time.monotonic() < start + seconds:
    code = v2.send("orders", b"n" * 200).status.code
    codes[code] = codes.get(code, 0) + 1
    n += 1
    pause = start + n / rate - time.monotonic()
    if pause > 0:
        time.sleep(pause)
print(json.dumps(codes))
"""
QUOTA = 100
PHASE_S = 3.0


def _quiet_latencies(v2: object, seconds: float) -> list[float]:
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        assert v2.send("orders", b"q" * 200).status.code == pb.Code.OK  # type: ignore[attr-defined]
        out.append(time.perf_counter() - started)
        time.sleep(0.005)
    return out


def test_a_saturating_tenant_does_not_slow_another(
    secure_broker: BrokerProcess, op: BrokerAdminClient
) -> None:
    noisy_creds = tenant(op, "noisy")
    quiet_creds = tenant(op, "quiet")
    op.put_quota("noisy", {"produce_messages_per_s": QUOTA})
    quiet = client(secure_broker, "quiet", quiet_creds)
    baseline: list[float] = []
    loaded: list[float] = []
    totals: dict[str, int] = {}
    try:
        _quiet_latencies(quiet, 1.0)  # warm up channels and caches
        for _ in range(2):
            baseline += _quiet_latencies(quiet, PHASE_S)
            noisy = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    NOISY,
                    secure_broker.target,
                    *noisy_creds,
                    str(PHASE_S + 1.5),
                    str(3 * QUOTA),
                ],
                cwd=REPO_ROOT,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                time.sleep(1.0)  # the noisy tenant is at its limit
                loaded += _quiet_latencies(quiet, PHASE_S)
                out, _ = noisy.communicate(timeout=60)
            finally:
                if noisy.poll() is None:
                    noisy.kill()
                    noisy.wait()
            for code, count in json.loads(out.strip().splitlines()[-1]).items():
                totals[code] = totals.get(code, 0) + count
    finally:
        quiet.close()
    # the noisy tenant was saturated: often refused, and accepted no more than its quota allows (its
    # rate over both noisy phases, plus a full bucket, a second's worth, at the start of each). Not
    # "most refused": on a VM with much of its CPU time stolen the noisy client reached about 2.2x
    # the quota, not 3x, and was refused on 45% of its calls.
    accepted, refused = totals.get(str(pb.Code.OK), 0), totals.get(str(pb.Code.TOO_MANY_REQUESTS), 0)
    assert refused > 0.25 * (accepted + refused)
    assert 0 < accepted <= 1.1 * QUOTA * (2 * (PHASE_S + 1.5) + 2)
    ratio = statistics.median(loaded) / statistics.median(baseline)
    assert ratio <= 1.2, (ratio, statistics.median(baseline), statistics.median(loaded))
