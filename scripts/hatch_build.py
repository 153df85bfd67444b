"""Packaging hook: compile the C encoders (scripts/build_ext.py) whenever uv (through hatchling)
builds the project.

An editable install (``uv sync``, ``make venv``) leaves the shared objects next to their sources; a
wheel (the container image) carries them. A failed compile is reported and the build goes on: the
store then appends with the pure-Python encoder, the broker builds received messages with protobuf's
Python API, and ``tests/unit/store/test_record.py`` and ``tests/unit/dataplane/test_v2_codec.py`` say so.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface  # type: ignore[import-not-found]


class RecordCodecBuildHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        spec = importlib.util.spec_from_file_location("mqcloud_build_ext", root / "scripts" / "build_ext.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            built = module.build(root)
        except Exception as exc:  # noqa: BLE001 - any compiler failure: fall back, loudly
            print(f"mqcloud: could not compile {module.SOURCE} ({exc}); using Python's", file=sys.stderr)
            return
        if version != "editable":
            for path in built:
                build_data["force_include"][str(path)] = str(path.relative_to(root))
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
