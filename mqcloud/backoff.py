"""Retry backoff policies, as carried in ``Settings.backoff_policy``."""

from __future__ import annotations

from dataclasses import dataclass

from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = ("RetryBackoff",)


@dataclass(frozen=True)
class RetryBackoff:
    """``max_attempts`` plus either an exponential policy or a customized list of delays (seconds).

    ``delay(attempt)`` is the wait after the ``attempt``-th (1-based) failed attempt/delivery.
    """

    max_attempts: int = 3
    initial: float = 0.01
    maximum: float = 1.0
    multiplier: float = 2.0
    customized: tuple[float, ...] = ()

    def delay(self, attempt: int) -> float:
        attempt = max(1, attempt)
        if self.customized:
            return self.customized[min(attempt, len(self.customized)) - 1]
        return float(min(self.initial * self.multiplier ** (attempt - 1), self.maximum))

    @classmethod
    def from_pb(cls, policy: pb.RetryPolicy, default: RetryBackoff | None = None) -> RetryBackoff:
        base = default or cls()
        max_attempts = policy.max_attempts or base.max_attempts
        which = policy.WhichOneof("strategy")
        if which == "customized_backoff" and policy.customized_backoff.next:
            return cls(
                max_attempts=max_attempts,
                customized=tuple(d.ToNanoseconds() / 1e9 for d in policy.customized_backoff.next),
            )
        if which == "exponential_backoff":
            e = policy.exponential_backoff
            return cls(
                max_attempts=max_attempts,
                initial=e.initial.ToNanoseconds() / 1e9 or base.initial,
                maximum=e.max.ToNanoseconds() / 1e9 or base.maximum,
                multiplier=e.multiplier or base.multiplier,
            )
        return cls(max_attempts, base.initial, base.maximum, base.multiplier, base.customized)
