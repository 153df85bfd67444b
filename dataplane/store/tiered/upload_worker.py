"""The upload child process: ``python -m dataplane.store.tiered.upload_worker`` (started by
:class:`~dataplane.store.tiered.uploader.UploadWorker`; the protocol is described there).

It exits when its input ends or when its parent is gone (a broker killed with SIGKILL never leaves
an uploader behind for longer than a second, nor a half-finished upload listed anywhere: only the
parent writes the manifest).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dataplane.store.errors import StoreError
from dataplane.store.tiered.object_store import ObjectStoreSettings, ObstoreBackend
from dataplane.store.tiered.uploader import Pacer, TierVerifyError, upload_file

__all__ = ("main",)

logger = logging.getLogger(__name__)

_PARENT_POLL_S = 0.5
# Offload is background work: on a busy machine the broker's request threads come first (CFS gives
# a nice-10 process about a tenth of a normal one's share); the offload lag metric shows the cost.
_NICE = 10


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(_PARENT_POLL_S)
        if os.getppid() != parent:
            os._exit(1)


def _answer(objects: ObstoreBackend, pacer: Pacer, request: dict[str, Any]) -> dict[str, str]:
    pacer.rate = float(request.get("rate", 0))
    try:
        md5 = upload_file(
            objects,
            str(request["key"]),
            Path(request["path"]),
            int(request["size"]),
            int(request["part_bytes"]),
            pacer,
        )
    except TierVerifyError as exc:
        return {"error": str(exc), "kind": "verify"}
    except (StoreError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {"error": first, "kind": "unavailable"}
    return {"md5": md5}


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="tier upload worker: %(message)s")
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    os.nice(_NICE)
    # answers go to a private copy of stdout; anything printed by libraries goes to stderr instead
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer
    settings = ObjectStoreSettings(**json.loads(stdin.readline()))
    objects = ObstoreBackend(settings)
    pacer = Pacer()
    for line in stdin:
        answer = _answer(objects, pacer, json.loads(line))
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
