"""Tiered storage on a broker node: the store built from settings, per-topic retention from the
topic configuration, and Prometheus metrics of the tier (docs/tiered-storage.md)."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from dataplane.config import BrokerSettings
from dataplane.metadata import MetadataStore
from dataplane.store import MessageStoreConfig
from dataplane.store.tiered import ObjectStoreSettings, TierConfig, TieredMessageStore

__all__ = ("TierCollector", "open_tiered_store", "tier_url")


def tier_url(settings: BrokerSettings) -> str:
    """The object-store URL of this broker group: ``{tier_url}/{broker_name}``."""
    base = settings.tier_url or f"file://{(settings.data_dir / 'tiered-objects').resolve()}"
    return f"{base.rstrip('/')}/{settings.broker_name}"


def open_tiered_store(
    settings: BrokerSettings, config: MessageStoreConfig, metadata: MetadataStore
) -> TieredMessageStore:
    """A :class:`TieredMessageStore` configured from ``MQ_BROKER_TIER_*``, retention from topics."""
    tier = TierConfig(
        ObjectStoreSettings(
            url=tier_url(settings),
            endpoint=settings.tier_endpoint,
            region=settings.tier_region,
            access_key_id=settings.tier_access_key_id,
            secret_access_key=settings.tier_secret_access_key.get_secret_value(),
            timeout_s=settings.tier_request_timeout_s,
        ),
        offload_after_ms=settings.tier_offload_after_ms,
        offload_pending_bytes=settings.tier_offload_pending_bytes,
        hot_retention_hours=settings.tier_hot_retention_hours,
        tiered_retention_hours=settings.tier_retention_hours,
        cache_bytes=settings.tier_cache_bytes,
        block_bytes=settings.tier_block_bytes,
        prefetch_blocks=settings.tier_prefetch_blocks,
        interval_ms=settings.tier_interval_ms,
        offload_rate_bytes=settings.tier_offload_rate_bytes,
    )
    store = TieredMessageStore(config, tier)

    def retention(topic: str) -> tuple[float, float]:
        topic_config = metadata.get_topic(topic)
        if topic_config is None:  # system, retry and DLQ topics
            return settings.tier_hot_retention_hours, settings.tier_retention_hours
        hot = topic_config.retention_hours or settings.tier_hot_retention_hours
        return float(hot), float(topic_config.tiered_retention_hours)

    store.set_tier_hooks(retention=retention)
    _COLLECTOR.stores.add(store)
    return store


class TierCollector(Collector):
    """Reads :meth:`TieredMessageStore.tier_status` of every open tiered store at scrape time."""

    def __init__(self) -> None:
        self.stores: weakref.WeakSet[TieredMessageStore] = weakref.WeakSet()

    def collect(self) -> Iterator[Any]:
        topic_bytes = GaugeMetricFamily(
            "mq_tier_topic_bytes",
            "Record bytes of a topic, local or in the object store",
            labels=["topic", "tier"],
        )
        store_bytes = GaugeMetricFamily(
            "mq_tier_bytes", "Bytes on local disk / in the object store", labels=["tier"]
        )
        lag_bytes = GaugeMetricFamily("mq_tier_offload_lag_bytes", "Sealed segment bytes waiting for offload")
        lag_s = GaugeMetricFamily(
            "mq_tier_offload_lag_seconds", "Age of the oldest segment waiting for offload"
        )
        offloaded = CounterMetricFamily("mq_tier_offloaded_segments", "Segments offloaded and verified")
        failures = CounterMetricFamily("mq_tier_offload_failures", "Failed offload passes (retried)")
        expired = CounterMetricFamily("mq_tier_expired_segments", "Segments deleted by tiered retention")
        hits = CounterMetricFamily("mq_tier_cold_read_hits", "Cold-read blocks served from the cache")
        misses = CounterMetricFamily("mq_tier_cold_read_misses", "Cold-read blocks fetched by ranged GET")
        hit_rate = GaugeMetricFamily("mq_tier_cold_read_hit_ratio", "Cold-read cache hit rate")
        for store in list(self.stores):
            if not store.running:
                continue
            st = store.tier_status()
            for t in st.topics:
                topic_bytes.add_metric([t.topic, "local"], t.local_bytes)
                topic_bytes.add_metric([t.topic, "tiered"], t.tiered_bytes)
            store_bytes.add_metric(["local"], st.local_bytes)
            store_bytes.add_metric(["tiered"], st.tiered_bytes)
            lag_bytes.add_metric([], st.offload_lag_bytes)
            lag_s.add_metric([], st.offload_lag_seconds)
            offloaded.add_metric([], st.segments_offloaded)
            failures.add_metric([], st.offload_failures)
            expired.add_metric([], st.segments_expired)
            hits.add_metric([], st.cache_hits)
            misses.add_metric([], st.cache_misses)
            hit_rate.add_metric([], st.cache_hit_rate)
        yield from (
            topic_bytes,
            store_bytes,
            lag_bytes,
            lag_s,
            offloaded,
            failures,
            expired,
            hits,
            misses,
            hit_rate,
        )


_COLLECTOR = TierCollector()
REGISTRY.register(_COLLECTOR)
