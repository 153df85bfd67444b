"""Delay/timer messages: a timer wheel and a timer log over the CommitLog (docs/timers.md)."""

from dataplane.timer.recall import InvalidRecallHandle, RecallCodec, RecallHandle
from dataplane.timer.service import (
    P_DELIVER_MS,
    TIMER_TOPIC,
    RecallTooLate,
    TimerMessageStore,
    to_timer_message,
)

__all__ = (
    "P_DELIVER_MS",
    "TIMER_TOPIC",
    "InvalidRecallHandle",
    "RecallCodec",
    "RecallHandle",
    "RecallTooLate",
    "TimerMessageStore",
    "to_timer_message",
)
