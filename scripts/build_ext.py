"""Compile the store's C extension (``dataplane/store/_record_codec.c``) next to its source.

Run by the packaging hook (``scripts/hatch_build.py``) whenever uv builds the project, and by hand
after editing the C file: ``uv run python scripts/build_ext.py``. Without a compiler the store falls
back to the pure-Python encoder (``dataplane/store/record.py``), slower but byte-identical.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = "dataplane.store._record_codec"
SOURCE = "dataplane/store/_record_codec.c"


def build(root: Path = ROOT) -> Path:
    """Build the extension in place under ``root``; returns the path of the shared object."""
    # setuptools only as a compiler driver: it knows this interpreter's flags and suffix
    from setuptools import Distribution, Extension  # type: ignore[import-untyped]

    extension = Extension(MODULE, [SOURCE], extra_compile_args=["-O2", "-std=c11", "-Wall"])
    dist = Distribution({"name": "mqcloud-record-codec", "ext_modules": [extension], "script_name": "build"})
    dist.src_root = str(root)
    command = dist.get_command_obj("build_ext")
    command.inplace = True  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="mqcloud-build-") as temp:
        command.build_temp = temp  # type: ignore[attr-defined]
        command.ensure_finalized()
        here = Path.cwd()
        try:
            os.chdir(root)
            command.run()
        finally:
            os.chdir(here)
    return root / str(command.get_ext_filename(MODULE))  # type: ignore[attr-defined]


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
