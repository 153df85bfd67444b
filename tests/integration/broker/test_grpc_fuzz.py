"""Fuzz every gRPC handler of a real broker with random and mutated protobuf requests.

Requests are generated from the message descriptors (any field, any enum number, nested messages
a few levels deep, names drawn partly from real resources so handlers get past the first lookup),
and as raw bytes: valid requests with bytes flipped, cut or appended. A handler may refuse anything
with a v2 status or a gRPC status, but must never crash: an UNKNOWN status is an exception that
escaped a handler, and the broker's log must show no traceback. Afterwards the broker still works.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor as d
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqcloud.admin.v1 import admin_pb2, cluster_pb2, messages_pb2, tier_pb2
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.integration.broker.conftest import V2, BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAMES = st.sampled_from(["fuzz", "orders", "g1", "", "%RETRY%acme%g1", "a" * 200, "x%y", "../..", "*"])
NAMESPACES = st.sampled_from(["acme", "", "other", "acme%", "é"])
MAX_DEPTH = 3


def _scalar(field: d.FieldDescriptor) -> st.SearchStrategy[Any]:
    t = field.type
    if t == d.FieldDescriptor.TYPE_STRING:
        if field.name in ("name",):
            return NAMES
        if field.name == "resource_namespace":
            return NAMESPACES
        return st.one_of(st.text(max_size=40), NAMES)
    if t == d.FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=256)
    if t == d.FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == d.FieldDescriptor.TYPE_ENUM:
        numbers = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(numbers), st.integers(-3, 100))
    if t in (d.FieldDescriptor.TYPE_FLOAT, d.FieldDescriptor.TYPE_DOUBLE):
        return st.floats(allow_nan=True, width=32 if t == d.FieldDescriptor.TYPE_FLOAT else 64)
    if t in (d.FieldDescriptor.TYPE_UINT32, d.FieldDescriptor.TYPE_FIXED32):
        return st.integers(0, 2**32 - 1)
    if t in (d.FieldDescriptor.TYPE_UINT64, d.FieldDescriptor.TYPE_FIXED64):
        return st.integers(0, 2**64 - 1)
    if t in (d.FieldDescriptor.TYPE_INT64, d.FieldDescriptor.TYPE_SINT64, d.FieldDescriptor.TYPE_SFIXED64):
        return st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-5, 100_000))
    return st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-5, 1000))


@st.composite
def messages_of(draw: st.DrawFn, descriptor: d.Descriptor, depth: int = 0) -> dict[str, Any]:
    """A dict of field values for ``descriptor`` (suitable for ``ParseDict``-free construction)."""
    values: dict[str, Any] = {}
    seen_oneofs: set[str] = set()
    for field in descriptor.fields:
        if field.containing_oneof is not None:
            if field.containing_oneof.name in seen_oneofs or not draw(st.booleans()):
                continue
            seen_oneofs.add(field.containing_oneof.name)
        elif not draw(st.integers(0, 3)):  # leave some fields unset
            continue
        is_message = field.type == d.FieldDescriptor.TYPE_MESSAGE
        if is_message and depth >= MAX_DEPTH:
            continue
        if is_message and field.message_type.GetOptions().map_entry:
            key_field, value_field = field.message_type.fields
            values[field.name] = draw(
                st.dictionaries(_scalar(key_field), _scalar(value_field), max_size=4)  # type: ignore[arg-type]
            )
            continue
        one: st.SearchStrategy[Any] = (
            messages_of(field.message_type, depth + 1) if is_message else _scalar(field)
        )
        if field.is_repeated:
            values[field.name] = draw(st.lists(one, max_size=3))
        else:
            values[field.name] = draw(one)
    return values


def _build(cls: type[Message], values: dict[str, Any]) -> Message:
    msg = cls()
    for name, value in values.items():
        field = cls.DESCRIPTOR.fields_by_name[name]
        if field.type == d.FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
            getattr(msg, name).update(value)
        elif field.type == d.FieldDescriptor.TYPE_MESSAGE:
            sub_cls = type(getattr(msg, name)) if not field.is_repeated else None
            if field.is_repeated:
                container = getattr(msg, name)
                for item in value:
                    container.add().CopyFrom(_build(type(container.add()), item))
                    del container[-2]
            else:
                assert sub_cls is not None
                getattr(msg, name).CopyFrom(_build(sub_cls, value))
        elif field.is_repeated:
            getattr(msg, name).extend(value)
        else:
            try:
                setattr(msg, name, value)
            except (ValueError, TypeError):  # enum numbers out of range for closed enums, etc.
                pass
    return msg


def requests_for(cls: type[Message]) -> st.SearchStrategy[Message]:
    return messages_of(cls.DESCRIPTOR).map(lambda values: _build(cls, values))


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "cut", "append", "insert"]))
        if op == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= draw(st.integers(1, 255))
        elif op == "cut" and data:
            del data[draw(st.integers(0, len(data) - 1)) :]
        elif op == "append":
            data += draw(st.binary(min_size=1, max_size=16))
        elif op == "insert":
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


class Raw:
    """Calls any method with raw request bytes, so mutated wire data reaches the server."""

    def __init__(self, channel: grpc.Channel, metadata: list[tuple[str, str]]) -> None:
        self.channel = channel
        self.metadata = metadata
        self.last_details = ""

    def call(self, path: str, request: bytes, streaming: bool) -> grpc.StatusCode:
        ident: Callable[[bytes], bytes] = lambda b: b  # noqa: E731
        try:
            if streaming:
                stream = self.channel.unary_stream(
                    path, request_serializer=ident, response_deserializer=ident
                )
                for _ in stream(request, metadata=self.metadata, timeout=1.5):
                    pass
            else:
                unary = self.channel.unary_unary(path, request_serializer=ident, response_deserializer=ident)
                unary(request, metadata=self.metadata, timeout=5)
        except grpc.RpcError as exc:
            self.last_details = exc.details() or ""
            return exc.code()  # type: ignore[no-any-return]
        return grpc.StatusCode.OK


V2_METHODS: list[tuple[str, type[Message], bool]] = [
    ("QueryRoute", svc.QueryRouteRequest, False),
    ("Heartbeat", svc.HeartbeatRequest, False),
    ("SendMessage", svc.SendMessageRequest, False),
    ("QueryAssignment", svc.QueryAssignmentRequest, False),
    ("ReceiveMessage", svc.ReceiveMessageRequest, True),
    ("AckMessage", svc.AckMessageRequest, False),
    ("ForwardMessageToDeadLetterQueue", svc.ForwardMessageToDeadLetterQueueRequest, False),
    ("PullMessage", svc.PullMessageRequest, True),
    ("UpdateOffset", svc.UpdateOffsetRequest, False),
    ("GetOffset", svc.GetOffsetRequest, False),
    ("QueryOffset", svc.QueryOffsetRequest, False),
    ("EndTransaction", svc.EndTransactionRequest, False),
    ("NotifyClientTermination", svc.NotifyClientTerminationRequest, False),
    ("ChangeInvisibleDuration", svc.ChangeInvisibleDurationRequest, False),
    ("RecallMessage", svc.RecallMessageRequest, False),
]


def _admin_methods() -> list[tuple[str, type[Message], bool]]:
    methods = []
    for module, name in (
        (admin_pb2, "BrokerAdmin"),
        (messages_pb2, "MessageAdmin"),
        (cluster_pb2, "ClusterAdmin"),
        (tier_pb2, "TierAdmin"),
    ):
        service = module.DESCRIPTOR.services_by_name[name]
        methods += [
            (f"/{service.full_name}/{m.name}", getattr(module, m.input_type.name), m.server_streaming)
            for m in service.methods
            if not m.name.startswith("Delete")  # deleting what the v2 fuzzing needs is pointless churn
        ]
    return methods


def _explore(strategy: st.SearchStrategy[Any], check: Callable[[Any], None], examples: int) -> None:
    """Run ``check`` over ``examples`` draws of ``strategy`` (hypothesis shrinks any failure)."""

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(strategy)
    def run(value: Any) -> None:
        check(value)

    run()


@pytest.fixture
def fuzz_target(broker: BrokerProcess) -> Iterator[tuple[BrokerProcess, V2]]:
    with BrokerAdminClient(broker.target) as admin:
        admin.create_topic("orders", namespace="acme", queue_count=2)
        admin.create_topic("fuzz", namespace="acme", queue_count=1, message_type="FIFO")
        admin.create_group("g1", namespace="acme")
    client = V2(broker.target, namespace="acme")
    yield broker, client
    client.close()


def _assert_healthy(broker: BrokerProcess, v2: V2) -> None:
    assert broker.proc is not None and broker.proc.poll() is None, "".join(broker.output[-50:])
    log = "".join(broker.output)
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    reply = v2.send("orders", body=b"still alive")
    assert reply.entries[0].status.code == pb.Code.OK


def test_random_requests_never_crash_a_handler(fuzz_target: tuple[BrokerProcess, V2]) -> None:
    broker, v2 = fuzz_target
    raw = Raw(v2.channel, v2.md)
    unknown: list[str] = []
    methods = [(f"/apache.rocketmq.v2.MessagingService/{n}", c, s) for n, c, s in V2_METHODS]
    methods += _admin_methods()
    for path, cls, streaming in methods:

        def check(request: Message, path: str = path, streaming: bool = streaming) -> None:
            code = raw.call(path, request.SerializeToString(), streaming)
            if code == grpc.StatusCode.UNKNOWN:
                unknown.append(f"{path}: {raw.last_details}: {request}")

        _explore(requests_for(cls), check, 40)
    assert not unknown, unknown[:3]
    _assert_healthy(broker, v2)


def test_mutated_wire_bytes_never_crash_a_handler(fuzz_target: tuple[BrokerProcess, V2]) -> None:
    broker, v2 = fuzz_target
    raw = Raw(v2.channel, v2.md)
    sp = pb.SystemProperties(message_id="01ABC", message_type=pb.MessageType.NORMAL, born_host="h")
    seeds: list[tuple[str, Message, bool]] = [
        (
            "SendMessage",
            svc.SendMessageRequest(
                messages=[pb.Message(topic=v2.res("orders"), body=b"seed", system_properties=sp)]
            ),
            False,
        ),
        ("QueryRoute", svc.QueryRouteRequest(topic=v2.res("orders")), False),
        (
            "ReceiveMessage",
            svc.ReceiveMessageRequest(
                group=v2.res("g1"), message_queue=pb.MessageQueue(topic=v2.res("orders")), batch_size=4
            ),
            True,
        ),
        (
            "AckMessage",
            svc.AckMessageRequest(
                group=v2.res("g1"),
                topic=v2.res("orders"),
                entries=[svc.AckMessageEntry(message_id="01ABC", receipt_handle="not-a-handle")],
            ),
            False,
        ),
        ("QueryOffset", svc.QueryOffsetRequest(message_queue=pb.MessageQueue(topic=v2.res("orders"))), False),
    ]
    unknown: list[str] = []
    for name, seed, streaming in seeds:
        path = f"/apache.rocketmq.v2.MessagingService/{name}"

        def check(data: bytes, path: str = path, streaming: bool = streaming) -> None:
            code = raw.call(path, data, streaming)
            if code == grpc.StatusCode.UNKNOWN:
                unknown.append(f"{path}: {raw.last_details}: {data!r}")

        _explore(mutated(seed.SerializeToString()), check, 60)
    assert not unknown, unknown[:3]
    _assert_healthy(broker, v2)


def test_random_telemetry_commands_never_crash_the_stream(fuzz_target: tuple[BrokerProcess, V2]) -> None:
    broker, v2 = fuzz_target
    unknown: list[str] = []

    def check(commands: list[Message]) -> None:
        stream = v2.stub.Telemetry(iter(commands), metadata=v2.md, timeout=1.5)
        try:
            for _ in stream:
                pass
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNKNOWN:
                unknown.append(str(commands))

    _explore(st.lists(requests_for(svc.TelemetryCommand), min_size=1, max_size=3), check, 40)
    assert not unknown, unknown[:3]
    _assert_healthy(broker, v2)
