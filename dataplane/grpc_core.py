"""gRPC C-core switches a broker process sets before grpc is imported.

grpcio reads ``GRPC_EXPERIMENTS`` (a comma-separated list of C-core experiments, ``-name`` turning a
default one off) once, when ``import grpc`` initializes the core: setting it later changes nothing.
A broker node started by ``mqctl broker start`` applies the ``grpc_experiments`` setting here, after
loading its settings and before anything imports grpc.

The default turns off two experiments grpcio 1.85 enables: ``event_engine_listener`` and
``event_engine_for_all_other_endpoints``. With them on, an accepted connection's reads and writes run
on the EventEngine's own threads and each completion is handed over to grpc.aio's poller thread,
then to the event loop. Off, the core's older I/O manager does that I/O on the thread that polls
for completions, one hand-over less. On a 2-core VM the CPU per consumed message fell by about a
tenth, the broker's and the bare server's alike, and a paced single-message call at 1,000 calls/s
cost less in every run (the bare server 10-18%, the broker 3-11%; docs/benchmarks.md, "The
server's I/O on the polling thread"). Client
channels keep the EventEngine: the setting is a server process's, and the SDK sets nothing in its
users' processes.

An operator's own ``GRPC_EXPERIMENTS`` in the environment wins over the setting.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping

__all__ = ("DEFAULT_GRPC_EXPERIMENTS", "ENV", "apply_experiments")

logger = logging.getLogger(__name__)

ENV = "GRPC_EXPERIMENTS"
DEFAULT_GRPC_EXPERIMENTS = "-event_engine_listener,-event_engine_for_all_other_endpoints"


def apply_experiments(
    wanted: str,
    environ: MutableMapping[str, str] = os.environ,
    modules: Mapping[str, object] = sys.modules,
) -> str:
    """Put ``wanted`` in ``GRPC_EXPERIMENTS`` unless the environment already names experiments or
    grpc was already imported (then it would have no effect: a warning says so). Returns the value
    the core reads, or reads already."""
    current = environ.get(ENV)
    if current is not None:  # the operator's choice
        return current
    if not wanted:
        return ""
    if "grpc" in modules:
        logger.warning(
            "grpc was imported before the broker's settings were read: %s=%s not applied", ENV, wanted
        )
        return ""
    environ[ENV] = wanted
    return wanted
