"""Compile the C extensions next to their sources.

- ``dataplane/store/_record_codec.c``: the store's batch encoder and queue writers (without it the
  store falls back to the pure-Python encoder in ``dataplane/store/record.py``);
- ``dataplane/_v2_codec.c``: the encoder of received v2 messages (without it the broker builds them
  with protobuf's Python API, ``dataplane/services/consume.py::fill_v2_message``).

Both fallbacks are slower and produce the same bytes. Run by the packaging hook
(``scripts/hatch_build.py``) whenever uv builds the project, and by hand after editing a C file:
``uv run python scripts/build_ext.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTENSIONS = {  # module -> source
    "dataplane.store._record_codec": "dataplane/store/_record_codec.c",
    "dataplane._v2_codec": "dataplane/_v2_codec.c",
}
SOURCE = ", ".join(EXTENSIONS.values())  # for the packaging hook's message


def build(root: Path = ROOT) -> list[Path]:
    """Build the extensions in place under ``root``; returns the paths of the shared objects."""
    # setuptools only as a compiler driver: it knows this interpreter's flags and suffix
    from setuptools import Distribution, Extension  # type: ignore[import-untyped]

    extensions = [
        Extension(module, [source], extra_compile_args=["-O2", "-std=c11", "-Wall"])
        for module, source in EXTENSIONS.items()
    ]
    dist = Distribution({"name": "mqcloud-codecs", "ext_modules": extensions, "script_name": "build"})
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
    return [root / str(command.get_ext_filename(module)) for module in EXTENSIONS]  # type: ignore[attr-defined]


if __name__ == "__main__":
    for path in build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT):
        print(path)
