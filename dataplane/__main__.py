"""``python -m dataplane``: start a broker from the environment (MQ_BROKER_*)."""

from __future__ import annotations

import sys

from dataplane.config import BrokerSettings
from dataplane.cpu_affinity import apply_cpu_affinity
from dataplane.event_loop import run_on
from dataplane.grpc_core import apply_experiments

settings = BrokerSettings()
apply_experiments(settings.grpc_experiments)  # before dataplane.server imports grpc
try:  # before the server starts threads, which inherit it
    apply_cpu_affinity(settings.cpu_affinity)
except (ValueError, OSError) as exc:
    sys.exit(f"invalid broker settings: {exc}")

from dataplane.server import configure_logging, run  # noqa: E402

configure_logging()
run_on(settings.event_loop, run(settings))
