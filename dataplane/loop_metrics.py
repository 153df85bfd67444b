"""Counters and histograms for the data path, updated by the event loop's thread without locks.

A ``prometheus_client`` counter child takes a lock on every ``inc`` and a histogram child two
(bucket and sum) after a linear walk of its buckets: a few microseconds of every RPC
(``bench/broker_work.py``'s ``broker_send_us_per_call`` shows them). The broker updates these
figures from one thread, its event loop, so a plain number per child is enough; the registry reads
them when Prometheus scrapes (a scrape from the metrics thread sees each number whole, at worst one
update behind). Same names, types and labels as the ``prometheus_client`` metrics they replace.

Only for figures updated on the event loop's thread: anything else keeps ``prometheus_client``'s own.
A broker process runs one event loop. Where several run in one process (some tests start brokers on
loops of their own), an update can be lost when two threads bump the same series at the same moment.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

__all__ = ("DEFAULT_BUCKETS", "LoopCounter", "LoopHistogram")

# prometheus_client's default buckets (seconds)
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


class CounterChild:
    """One labelled series of a :class:`LoopCounter`."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        self.value += amount


class HistogramChild:
    """One labelled series of a :class:`LoopHistogram`: a count per bucket (not cumulative) and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf's
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        # the first bound >= amount: a bucket counts what is less than or equal to its bound
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.sum += amount


Child = TypeVar("Child", CounterChild, HistogramChild)


class _Labelled(Collector, Generic[Child]):
    """A metric's children by label values; subclasses make a child and say how it is collected."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], Child] = {}
        (registry if registry is not None else REGISTRY).register(self)  # collects once, for the names

    def labels(self, *values: str) -> Child:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values}")
            child = self._children[values] = self._new_child()
        return child

    def _new_child(self) -> Child:
        raise NotImplementedError


class LoopCounter(_Labelled[CounterChild]):
    """A labelled counter (exported as ``NAME_total``)."""

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in list(self._children.items()):
            family.add_metric(values, child.value)
        yield family


class LoopHistogram(_Labelled[HistogramChild]):
    """A labelled histogram (``NAME_bucket``, ``NAME_count``, ``NAME_sum``)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        registry: CollectorRegistry | None = None,
    ) -> None:
        bounds = tuple(float(b) for b in buckets if b != float("inf"))
        if not bounds or list(bounds) != sorted(set(bounds)):
            raise ValueError(f"{name}: buckets must be increasing: {buckets}")
        self.bounds = bounds
        super().__init__(name, documentation, labelnames, registry)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self.bounds)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        edges = [*(repr(b) for b in self.bounds), "+Inf"]
        for values, child in list(self._children.items()):
            counts, total = list(child.counts), child.sum  # at most one observation apart
            cumulative: list[tuple[str, float]] = []
            running = 0
            for edge, count in zip(edges, counts, strict=True):
                running += count
                cumulative.append((edge, running))
            family.add_metric(values, cumulative, total)
        yield family
