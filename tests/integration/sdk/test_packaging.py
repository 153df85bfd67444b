"""The built wheel ships the SDK as a typed package (PEP 561): ``mqcloud/py.typed`` is in it."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_wheel_marks_mqcloud_as_typed(tmp_path: Path) -> None:
    # `uv run` exports its own path as UV; a plain pytest finds uv on PATH
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed to build the wheel"
    subprocess.run(
        [uv, "build", "--wheel", "--out-dir", str(tmp_path), str(REPO_ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [record] = [n for n in names if n.endswith(".dist-info/RECORD")]
        recorded = {row[0] for row in csv.reader(io.TextIOWrapper(archive.open(record), "utf-8"))}
    # the marker sits at the package root, next to the modules type checkers read
    assert "mqcloud/py.typed" in names
    assert {"mqcloud/__init__.py", "mqcloud/producer.py"} <= names
    assert "mqcloud/py.typed" in recorded  # installers copy what RECORD lists
