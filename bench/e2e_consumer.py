"""The waiting consumers of broker_bench's end-to-end runs, in a process of their own.

The e2e runs used to park their consumers in the producer's process, on its asyncio loop, and at
5,000 msgs/s that process needed more than the core it had (``e2e_client_cpu`` 0.84-1.07 on the
2-core VMs): messages waited in the client's own queue, and the p99 measured that queue, for the
broker and for the bare relay alike. Here the consumers are threads of another process, on gRPC's
blocking API with ``SingleThreadedUnaryStream`` (a receive's responses are read on the thread
that made the call, not handed over by a polling thread): about half the CPU per message of
grpc.aio's client on these VMs.

The process takes commands on stdin and answers on stdout, a JSON object per line, so one process
serves every e2e run of a bench:

- ``{"cmd": "begin", "target": T, "group": G, "topic": P, "threads": N, "poll_ms": M}``: N threads
  receive (32 at most, long-polling M ms) and ack what they get; answers ``{"ready": true}`` once
  they are started.
- ``{"cmd": "finish", "expect": E, "timeout_s": S}``: waits until E messages carrying a ``t0``
  property arrived (or S seconds), stops the threads and answers ``{"latencies": [...],
  "to_store": [...], "shapes": [...], "cpu_s": ...}``: each such message's ms from its ``t0`` (a
  ``time.monotonic_ns`` of the sender, the same clock in every process of the machine) to its
  arrival, in arrival order; for each, the ms from its ``t0`` to its store timestamp (the server's
  wall clock, in whole milliseconds as RocketMQ keeps it: up to 1 ms short; NaN without one);
  per receive that returned messages, [count, ms to its first, ms from its first to its last]; and
  this process's CPU seconds since ``begin``.
- ``{"cmd": "exit"}`` (or stdin closed): ends the process.

:class:`ConsumerProcess` drives it from the bench.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: the repository's packages
    sys.path.insert(0, str(REPO))

import grpc  # noqa: E402
import grpc.experimental  # noqa: E402

from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb  # noqa: E402
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc  # noqa: E402
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc as svc_grpc  # noqa: E402

__all__ = ("ConsumerProcess", "Receipts")

BATCH = 32
CALL_TIMEOUT_S = 10.0


@dataclass
class Receipts:
    """What one run's consumers saw (see the module docstring)."""

    latencies: list[float] = field(default_factory=list)
    to_store: list[float] = field(default_factory=list)  # of the same messages, in the same order
    shapes: list[tuple[int, float, float]] = field(default_factory=list)
    cpu_s: float = 0.0


class _Run:
    """The threads of one ``begin``: receive, record, ack, until stopped."""

    def __init__(self, command: dict[str, Any]) -> None:
        options = [(grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]
        self.channel = grpc.insecure_channel(command["target"], options=options)
        self.stub = svc_grpc.MessagingServiceStub(self.channel)
        self.group = pb.Resource(name=command["group"])
        self.topic = pb.Resource(name=command["topic"])
        self.poll_ms = int(command.get("poll_ms", 500))
        self.receipts = Receipts()
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.stopping = threading.Event()
        self.cpu_start = time.process_time()
        # t0 is of the monotonic clock, store timestamps of the wall clock: both read here, once
        self.wall_minus_monotonic_ns = time.time_ns() - time.monotonic_ns()
        self.threads = [
            threading.Thread(target=self._consume, daemon=True) for _ in range(int(command.get("threads", 4)))
        ]
        for thread in self.threads:
            thread.start()

    def _request(self) -> svc.ReceiveMessageRequest:
        request = svc.ReceiveMessageRequest(
            group=self.group,
            message_queue=pb.MessageQueue(topic=self.topic, id=-1),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            batch_size=BATCH,
            auto_renew=False,
        )
        request.invisible_duration.FromSeconds(60)
        # the poll's end is how soon a thread notices a finished run
        request.long_polling_timeout.FromMilliseconds(self.poll_ms)
        return request

    def _consume(self) -> None:
        request = self._request()
        while not self.stopping.is_set():
            entries: list[svc.AckMessageEntry] = []
            latencies: list[float] = []
            to_store: list[float] = []
            called = first = last = time.monotonic_ns()
            try:
                for frame in self.stub.ReceiveMessage(request, timeout=CALL_TIMEOUT_S):
                    if frame.WhichOneof("content") != "message":
                        continue
                    now = last = time.monotonic_ns()
                    if not entries:
                        first = now
                    message = frame.message
                    sent = message.user_properties.get("t0")
                    if sent is not None:
                        latencies.append((now - int(sent)) / 1e6)
                        to_store.append(self._to_store_ms(int(sent), message.system_properties))
                    entries.append(
                        svc.AckMessageEntry(
                            message_id=message.system_properties.message_id,
                            receipt_handle=message.system_properties.receipt_handle,
                        )
                    )
            except grpc.RpcError:
                if self.stopping.is_set():
                    return
                time.sleep(0.05)  # a refused or broken call: try again shortly, do not spin
                continue
            if entries:
                with self.lock:
                    self.receipts.latencies.extend(latencies)
                    self.receipts.to_store.extend(to_store)
                    self.receipts.shapes.append((len(entries), (first - called) / 1e6, (last - first) / 1e6))
                    self.arrived.notify_all()
                ack = svc.AckMessageRequest(group=self.group, topic=self.topic, entries=entries)
                try:
                    self.stub.AckMessage(ack, timeout=CALL_TIMEOUT_S)
                except grpc.RpcError:
                    pass  # the run's latencies are taken at receipt; an unacked message comes back later

    def _to_store_ms(self, sent_ns: int, system: pb.SystemProperties) -> float:
        """ms from a message's ``t0`` to its store timestamp (NaN when the server set none)."""
        if not system.HasField("store_timestamp"):
            return float("nan")
        stored_ns = system.store_timestamp.ToNanoseconds() - self.wall_minus_monotonic_ns
        return (stored_ns - sent_ns) / 1e6

    def finish(self, expect: int, timeout_s: float) -> Receipts:
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while len(self.receipts.latencies) < expect:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.arrived.wait(remaining)
        self.stopping.set()
        for thread in self.threads:  # each leaves within its poll
            thread.join(self.poll_ms / 1000 + CALL_TIMEOUT_S)
        self.channel.close()
        self.receipts.cpu_s = time.process_time() - self.cpu_start
        return self.receipts


def serve(commands: IO[str], answers: IO[str]) -> None:
    """Carry out the commands of ``commands`` (one JSON object per line) until ``exit`` or its end."""
    run: _Run | None = None

    def answer(payload: dict[str, Any]) -> None:
        answers.write(json.dumps(payload) + "\n")
        answers.flush()

    for line in commands:
        command = json.loads(line)
        if command["cmd"] == "begin":
            if run is not None:
                answer({"error": "begin while a run is on: finish it first"})
                continue
            run = _Run(command)
            answer({"ready": True})
        elif command["cmd"] == "finish":
            if run is None:
                answer({"error": "finish without begin"})
                continue
            receipts = run.finish(int(command["expect"]), float(command.get("timeout_s", 10)))
            run = None
            answer(
                {
                    "latencies": receipts.latencies,
                    "to_store": receipts.to_store,
                    "shapes": receipts.shapes,
                    "cpu_s": receipts.cpu_s,
                }
            )
        elif command["cmd"] == "exit":
            break
        else:
            answer({"error": f"unknown command {command['cmd']!r}"})


class ConsumerProcess:
    """The consumer process, started on entry and ended on exit; one run at a time, with
    ``threads`` receives in flight unless :meth:`begin` says otherwise."""

    def __init__(self, threads: int = 4) -> None:
        self.threads = threads
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> ConsumerProcess:
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            self._send({"cmd": "exit"})
            proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            self._proc = None

    def _send(self, command: dict[str, Any]) -> None:
        if self._proc is None or self._proc.stdin is None:
            raise RuntimeError("the consumer process is not running")
        self._proc.stdin.write(json.dumps(command) + "\n")
        self._proc.stdin.flush()

    def _answer(self) -> dict[str, Any]:
        if self._proc is None or self._proc.stdout is None:
            raise RuntimeError("the consumer process is not running")
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the consumer process ended (exit code {self._proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"consumer process: {answer['error']}")
        return answer

    def begin(
        self, target: str, group: str, topic: str, threads: int | None = None, poll_ms: int = 500
    ) -> None:
        """Start ``threads`` consumers of ``group`` on ``topic``; returns once they are running."""
        threads = self.threads if threads is None else threads
        self._send(
            {
                "cmd": "begin",
                "target": target,
                "group": group,
                "topic": topic,
                "threads": threads,
                "poll_ms": poll_ms,
            }
        )
        self._answer()

    def finish(self, expect: int, timeout_s: float) -> Receipts:
        """Wait for ``expect`` timed messages (at most ``timeout_s``), stop the consumers, and return
        what they saw. Blocking: call it from a thread when an event loop must keep running."""
        self._send({"cmd": "finish", "expect": expect, "timeout_s": timeout_s})
        answer = self._answer()
        shapes = [(int(n), float(f), float(s)) for n, f, s in answer["shapes"]]
        return Receipts(
            [float(x) for x in answer["latencies"]],
            [float(x) for x in answer["to_store"]],
            shapes,
            float(answer["cpu_s"]),
        )


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
