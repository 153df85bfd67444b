"""dataplane.loop_metrics: the lock-free counters and histograms scrape as prometheus_client's own."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from dataplane.loop_metrics import LoopCounter, LoopHistogram


def _samples(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample but the ``_created`` timestamps (which prometheus_client adds and we do not)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_a_histogram_scrapes_as_prometheus_clients_for_the_same_observations() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    buckets = (0.001, 0.01, 0.1, 1.0)
    mine = LoopHistogram("lat_seconds", "latency", ["method"], buckets=buckets, registry=ours)
    reference = Histogram("lat_seconds", "latency", ["method"], buckets=buckets, registry=theirs)
    # on a bound, between bounds, below the first, above the last: each lands where the reference puts it
    for method, value in [("a", 0.001), ("a", 0.0005), ("a", 0.05), ("b", 1.0), ("b", 7.0), ("a", 0.01)]:
        mine.labels(method).observe(value)
        reference.labels(method).observe(value)
    assert _samples(ours) == _samples(theirs)
    text = generate_latest(ours).decode()
    assert 'lat_seconds_bucket{le="0.001",method="a"} 2.0' in text
    assert 'lat_seconds_bucket{le="+Inf",method="b"} 2.0' in text
    assert 'lat_seconds_sum{method="b"} 8.0' in text


def test_a_counter_scrapes_as_prometheus_clients() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    mine = LoopCounter("sent", "messages", ["topic"], registry=ours)
    reference = Counter("sent", "messages", ["topic"], registry=theirs)
    for topic, n in [("t1", 1), ("t2", 64), ("t1", 3)]:
        mine.labels(topic).inc(n)
        reference.labels(topic).inc(n)
    assert _samples(ours) == _samples(theirs)
    assert _samples(ours)[("sent_total", frozenset({("topic", "t1")}))] == 4


def test_bad_use_is_refused_and_changes_nothing() -> None:
    registry = CollectorRegistry()
    counter = LoopCounter("c", "c", ["topic"], registry=registry)
    counter.labels("t").inc(2)
    with pytest.raises(ValueError, match="only go up"):
        counter.labels("t").inc(-1)
    with pytest.raises(ValueError, match="takes labels"):
        counter.labels("t", "extra")
    assert _samples(registry) == {("c_total", frozenset({("topic", "t")})): 2}
    with pytest.raises(ValueError, match="increasing"):
        LoopHistogram("h", "h", buckets=(1.0, 0.5), registry=registry)
