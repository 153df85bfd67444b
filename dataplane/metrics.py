"""Prometheus metrics of one broker node (served by ``prometheus_client`` on metrics_listen)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = ("BYTES_IN", "BYTES_OUT", "MESSAGES_IN", "MESSAGES_OUT", "RPC_LATENCY")

MESSAGES_IN = Counter("mq_broker_messages_in", "Messages stored", ["topic"])
BYTES_IN = Counter("mq_broker_bytes_in", "Body bytes stored", ["topic"])
MESSAGES_OUT = Counter("mq_broker_messages_out", "Messages delivered", ["topic"])
BYTES_OUT = Counter("mq_broker_bytes_out", "Body bytes delivered", ["topic"])
RPC_LATENCY = Histogram("mq_broker_rpc_seconds", "RPC handling time", ["method"])
