"""Broker-side retry backoff: how long a message whose invisible time ran out waits before its next
delivery, from the group's retry policy (RocketMQ's exponential or customized policies).

- exponential ``{initial_ms, max_ms, multiplier}``: ``initial * multiplier ** (attempt - 1)``, at most max;
- customized ``{delays_ms: [...]}``: the attempt's step, the last one repeating;
- no policy: ``default_delays_ms`` (the broker setting ``default_retry_delays_ms``, empty by default:
  such groups get the message back as soon as its invisible time ends, as plain POP does).

``attempt`` is the number of deliveries so far (1 after the first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ("ROCKETMQ_RETRY_DELAYS_MS", "retry_delay_ms")

# RocketMQ's message delay levels 3..18 used for consumer retries: 10 s, 30 s, 1 min .. 2 h.
ROCKETMQ_RETRY_DELAYS_MS = tuple(
    s * 1000 for s in (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)
_MAX_DELAY_MS = 24 * 3600 * 1000


def retry_delay_ms(policy: Mapping[str, Any], attempt: int, default_delays_ms: Sequence[int] = ()) -> int:
    """Milliseconds to wait before delivery ``attempt + 1``."""
    n = max(attempt, 1)
    if "exponential" in policy:
        e = policy["exponential"]
        initial = max(int(e.get("initial_ms") or 1000), 0)
        cap = max(int(e.get("max_ms") or _MAX_DELAY_MS), 0)
        multiplier = float(e.get("multiplier") or 2.0)
        try:
            delay = initial * multiplier ** (n - 1)
        except OverflowError:
            delay = float(cap)
        return int(min(delay, cap, _MAX_DELAY_MS))
    delays = list(policy.get("customized", {}).get("delays_ms") or default_delays_ms)
    if not delays:
        return 0
    return int(min(max(int(delays[min(n, len(delays)) - 1]), 0), _MAX_DELAY_MS))
