"""``python -m dataplane``: start a broker from the environment (MQ_BROKER_*)."""

from __future__ import annotations

from dataplane.config import BrokerSettings
from dataplane.event_loop import run_on
from dataplane.grpc_core import apply_experiments

settings = BrokerSettings()
apply_experiments(settings.grpc_experiments)  # before dataplane.server imports grpc

from dataplane.server import configure_logging, run  # noqa: E402

configure_logging()
run_on(settings.event_loop, run(settings))
