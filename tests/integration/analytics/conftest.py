"""Spark fixtures: Java provided when missing, one local SparkSession for the whole test session."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analytics.synthetic import write_control_exports

JRE_PACKAGE = "openjdk-17-jre-headless"

# Plan prices as the control plane exports them (decimal strings); "*" is the default plan.
PRO = {
    "tenant": "acme", "plan": "pro", "currency": "USD", "price_monthly": "10.00",
    "price_per_million_requests": "0.4000", "price_per_gb_in": "0.0100", "price_per_gb_out": "0.0900",
    "price_per_gb_month": "0.2300", "price_per_topic_day": "0.0100",
}  # fmt: skip
STANDARD = {
    "plan": "standard", "currency": "USD", "price_monthly": "5.00", "price_per_million_requests": "0.5000",
    "price_per_gb_in": "0.0000", "price_per_gb_out": "0.1000", "price_per_gb_month": "0.1000",
    "price_per_topic_day": "0.0000",
}  # fmt: skip
PRICES = [PRO, {**STANDARD, "tenant": "initech"}, {**STANDARD, "tenant": "*"}]


def ensure_java() -> None:
    """Install a headless JRE from the distribution when none is on PATH (as root, or with sudo -n)."""
    if shutil.which("java"):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=False, env=env, timeout=300)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", JRE_PACKAGE], check=False, env=env, timeout=900)
    if shutil.which("java") is None:
        pytest.fail(f"Spark needs Java and {JRE_PACKAGE} could not be installed")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    ensure_java()
    from analytics.io import build_session

    # py4j logs "closing" from finalizers after pytest closed the streams
    logging.getLogger("py4j").setLevel(logging.WARNING)

    session = build_session("local[2]", "mqcloud-tests", shuffle_partitions=2)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    """A metering root (with the price export of March 2025) and an output root."""
    root, out = tmp_path / "metering", tmp_path / "analytics"
    write_control_exports(root, "2025-03-01", PRICES)
    return root, out
