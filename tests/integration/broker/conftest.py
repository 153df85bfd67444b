"""A real broker process on a free loopback port, plus v2 and admin stubs to drive it."""

from __future__ import annotations

import hashlib
import hmac
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.apache.rocketmq.v2 import service_pb2_grpc

REPO_ROOT = Path(__file__).resolve().parents[3]
TEST_SEGMENT_BYTES = 16 << 20


class BrokerProcess:
    """``mqctl broker start`` in a subprocess; restartable on the same data dir and port.

    Brokers of tests that are not about security run in development mode (unsigned requests and an
    open admin API); ``dev=False`` runs one as in production, ``env`` adds MQ_BROKER_* settings.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int,
        *,
        dev: bool = True,
        env: dict[str, str] | None = None,
        metrics_listen: str = "0",
        args: tuple[str, ...] = (),
    ) -> None:
        self.metrics_listen = metrics_listen
        self.args = args
        self.data_dir = data_dir
        self.port = port
        self.dev = dev
        self.env = dict(env or {})
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        self.output = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "broker",
                "start",
                "--data-dir",
                str(self.data_dir),
                "--listen",
                self.target,
                "--metrics-listen",
                self.metrics_listen,
                *(["--dev"] if self.dev else []),
                *self.args,
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={
                **os.environ,
                "MQ_BROKER_GRACE_SECONDS": "2",
                # Segments are zero-filled when created: 1 GiB per broker start would fill the disk
                # over a full run (pytest keeps three runs' tmp dirs).
                "MQ_BROKER_COMMIT_LOG_SEGMENT_BYTES": str(TEST_SEGMENT_BYTES),
                "COLUMNS": "200",
                **self.env,
            },
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                if "broker listening on" in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("broker did not start:\n" + "".join(self.output))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class V2:
    """Blocking v2 stub with the metadata headers the official clients send."""

    def __init__(self, target: str, namespace: str = "", credentials: tuple[str, str] | None = None) -> None:
        self.channel = grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 << 20)])
        self.stub = service_pb2_grpc.MessagingServiceStub(self.channel)
        self.namespace = namespace
        self.client_id = f"test@{os.getpid()}@{uuid.uuid4().hex[:8]}"
        self.credentials = credentials
        self._md = [
            ("x-mq-client-id", self.client_id),
            ("x-mq-language", "PYTHON"),
            ("x-mq-client-version", "test"),
            ("x-mq-namespace", namespace),
        ]

    @property
    def md(self) -> list[tuple[str, str]]:
        """The headers of one call, signed (MQv2-HMAC-SHA1 over x-mq-date-time) with credentials."""
        if self.credentials is None:
            return self._md
        access_key, secret = self.credentials
        date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        signature = hmac.new(secret.encode(), date.encode(), hashlib.sha1).hexdigest()
        return [
            *self._md,
            ("x-mq-date-time", date),
            (
                "authorization",
                f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, "
                f"Signature={signature}",
            ),
        ]

    def res(self, name: str) -> pb.Resource:
        return pb.Resource(resource_namespace=self.namespace, name=name)

    def send(
        self, topic: str, body: bytes = b"hello", tag: str | None = None, keys: tuple[str, ...] = ()
    ) -> svc.SendMessageResponse:
        sp = pb.SystemProperties(
            message_id=uuid.uuid4().hex.upper(),
            body_encoding=pb.Encoding.IDENTITY,
            message_type=pb.MessageType.NORMAL,
            born_host="tester",
        )
        if tag is not None:
            sp.tag = tag
        sp.keys.extend(keys)
        msg = pb.Message(topic=self.res(topic), body=body, system_properties=sp)
        return self.stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=self.md, timeout=10)

    def receive(
        self,
        group: str,
        topic: str,
        *,
        batch: int = 16,
        invisible_s: float | None = 15,
        poll_s: float = 2,
        expression: str = "*",
        auto_renew: bool = False,
        attempt_id: str | None = None,
    ) -> list[svc.ReceiveMessageResponse]:
        """One ReceiveMessage; ``invisible_s=None`` sends no invisible duration (the official push
        consumers send none, with ``auto_renew``)."""
        request = svc.ReceiveMessageRequest(
            group=self.res(group),
            message_queue=pb.MessageQueue(topic=self.res(topic), id=0),
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression=expression),
            batch_size=batch,
            auto_renew=auto_renew,
        )
        if invisible_s is not None:
            request.invisible_duration.FromMilliseconds(int(invisible_s * 1000))
        if attempt_id is not None:
            request.attempt_id = attempt_id
        request.long_polling_timeout.FromMilliseconds(int(poll_s * 1000))
        return list(self.stub.ReceiveMessage(request, metadata=self.md, timeout=poll_s + 5))

    def ack(self, group: str, topic: str, message: pb.Message) -> svc.AckMessageResponse:
        entry = svc.AckMessageEntry(
            message_id=message.system_properties.message_id,
            receipt_handle=message.system_properties.receipt_handle,
        )
        return self.stub.AckMessage(
            svc.AckMessageRequest(group=self.res(group), topic=self.res(topic), entries=[entry]),
            metadata=self.md,
            timeout=10,
        )

    def close(self) -> None:
        self.channel.close()


def messages(responses: list[svc.ReceiveMessageResponse]) -> list[pb.Message]:
    return [r.message for r in responses if r.WhichOneof("content") == "message"]


def status_code(responses: list[svc.ReceiveMessageResponse]) -> int:
    return next(r.status.code for r in responses if r.WhichOneof("content") == "status")


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[BrokerAdminClient]:
    client = BrokerAdminClient(broker.target)
    yield client
    client.close()


@pytest.fixture
def v2(broker: BrokerProcess) -> Iterator[V2]:
    client = V2(broker.target, namespace="acme")
    yield client
    client.close()
