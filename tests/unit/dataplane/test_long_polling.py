"""Which parked long polls a wake reaches (dataplane.long_polling)."""

from __future__ import annotations

import asyncio

from dataplane.long_polling import EVERY, LongPolls


async def test_a_wake_reaches_the_longest_parked_member_of_each_group() -> None:
    loop = asyncio.get_running_loop()
    polls = LongPolls()
    g1 = [polls.park(loop, "t", "g1") for _ in range(3)]
    g2 = [polls.park(loop, "t", "g2") for _ in range(2)]
    pulls = [polls.park(loop, "t", EVERY) for _ in range(2)]
    other = polls.park(loop, "other-topic", "g1")
    polls.wake("t")
    assert [p.future.done() for p in g1] == [True, False, False]
    assert [p.future.done() for p in g2] == [True, False]
    assert all(p.future.done() for p in pulls)  # pulls wait on their own queue: all of them
    assert not other.future.done()
    polls.wake("t")  # the next wake goes to the next member of each group
    assert [p.future.done() for p in g1] == [True, True, False]


async def test_a_wake_is_handed_on_only_to_members_parked_before_it() -> None:
    loop = asyncio.get_running_loop()
    polls = LongPolls()
    first, second = polls.park(loop, "t", "g"), polls.park(loop, "t", "g")
    polls.wake("t")
    wake = first.future.result()
    again = polls.park(loop, "t", "g")  # the woken member parks again after looking
    polls.pass_on("t", "g", wake)
    assert second.future.done() and second.future.result() == wake
    polls.pass_on("t", "g", wake)  # nobody else was parked before the wake: the wake ends here
    assert not again.future.done()


async def test_ended_waits_are_skipped_and_forgotten() -> None:
    loop = asyncio.get_running_loop()
    polls = LongPolls()
    timed_out, waiting = polls.park(loop, "t", "g"), polls.park(loop, "t", "g")
    timed_out.future.cancel()  # what asyncio.wait_for does when the poll runs out
    polls.wake("t")
    assert waiting.future.done()
    polls.drop(timed_out)
    polls.drop(waiting)
    assert "t" not in polls


async def test_wake_all_reaches_every_member() -> None:
    loop = asyncio.get_running_loop()
    polls = LongPolls()
    parked = [polls.park(loop, "t", g) for g in ("g1", "g1", "g2", EVERY)]
    polls.wake_all("t")
    assert all(p.future.done() for p in parked)
    assert polls.topics() == []
