"""``python -m dataplane``: start a broker from the environment (MQ_BROKER_*)."""

from __future__ import annotations

import asyncio

from dataplane.config import BrokerSettings
from dataplane.server import configure_logging, run

configure_logging()
asyncio.run(run(BrokerSettings()))
