"""``python -m dataplane``: start a broker from the environment (MQ_BROKER_*)."""

from __future__ import annotations

from dataplane.config import BrokerSettings
from dataplane.event_loop import run_on
from dataplane.server import configure_logging, run

configure_logging()
settings = BrokerSettings()
run_on(settings.event_loop, run(settings))
