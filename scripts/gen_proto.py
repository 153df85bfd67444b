"""Generate the Python protobuf/gRPC stubs from ``proto/`` into the ``mqcloud`` package.

``proto/apache/rocketmq/v2/*.proto`` -> ``mqcloud/apache/rocketmq/v2/*_pb2{,_grpc}.py{,i}``
``proto/mqcloud/admin/v1/*.proto``   -> ``mqcloud/admin/v1/*_pb2{,_grpc}.py{,i}``
``proto/mqcloud/ha/v1/*.proto``      -> ``mqcloud/ha/v1/*_pb2{,_grpc}.py{,i}``

protoc writes absolute imports that follow the proto package (``from apache.rocketmq.v2 import
definition_pb2``); they are rewritten to import inside ``mqcloud``. Output is deterministic, so
``tests/unit/test_proto_stubs.py`` regenerates into a temp dir and compares bytes.

Usage: ``uv run python scripts/gen_proto.py [--out DIR]`` (default: the repository root).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO_ROOT / "proto"

# proto source directory (relative to proto/) -> package directory (relative to --out)
PACKAGES: dict[str, str] = {
    "apache/rocketmq/v2": "mqcloud/apache/rocketmq/v2",
    "mqcloud/admin/v1": "mqcloud/admin/v1",
    "mqcloud/ha/v1": "mqcloud/ha/v1",
}
# __init__.py files the generated modules need (mqcloud/__init__.py belongs to the SDK).
INIT_FILES = (
    "mqcloud/apache/__init__.py",
    "mqcloud/apache/rocketmq/__init__.py",
    "mqcloud/apache/rocketmq/v2/__init__.py",
    "mqcloud/admin/__init__.py",
    "mqcloud/admin/v1/__init__.py",
    "mqcloud/ha/__init__.py",
    "mqcloud/ha/v1/__init__.py",
)
INIT_TEXT = '"""Generated protobuf stubs (scripts/gen_proto.py); do not edit."""\n'

_IMPORT_RE = re.compile(r"^(\s*)(from|import) apache\.rocketmq\.", re.MULTILINE)


def _rewrite_imports(text: str) -> str:
    return _IMPORT_RE.sub(r"\1\2 mqcloud.apache.rocketmq.", text)


def generate(out: Path) -> list[Path]:
    """Run protoc over proto/ and write the stubs under ``out``; return the files written."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    sources = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            *sources,
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        for src_dir, dst_dir in PACKAGES.items():
            target = out / dst_dir
            target.mkdir(parents=True, exist_ok=True)
            for old in target.glob("*_pb2*.py*"):
                old.unlink()
            for generated in sorted((Path(tmp) / src_dir).iterdir()):
                dest = target / generated.name
                dest.write_text(_rewrite_imports(generated.read_text()))
                written.append(dest)
    for init in INIT_FILES:
        path = out / init
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(INIT_TEXT)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT, help="output root (default: repo root)")
    ns = parser.parse_args(argv)
    files = generate(ns.out.resolve())
    sys.stderr.write(f"generated {len(files)} files under {ns.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
