"""A real broker process driven through the generated v2 and admin stubs."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from dataplane.grpc_core import DEFAULT_GRPC_EXPERIMENTS
from mqcloud.admin_client import BrokerAdminClient, BrokerAdminError
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.conftest import free_port
from tests.integration.broker.conftest import V2, BrokerProcess, messages, status_code

pytestmark = pytest.mark.integration


def _setup(admin: BrokerAdminClient, topic: str = "orders", group: str = "g1", queues: int = 4) -> None:
    admin.create_topic(topic, namespace="acme", queue_count=queues)
    admin.create_group(group, namespace="acme")


def test_route_echoes_endpoints_and_types(broker: BrokerProcess, admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    endpoints = pb.Endpoints(
        scheme=pb.AddressScheme.DOMAIN_NAME, addresses=[pb.Address(host="localhost", port=broker.port)]
    )
    reply = v2.stub.QueryRoute(
        svc.QueryRouteRequest(topic=v2.res("orders"), endpoints=endpoints), metadata=v2.md
    )
    assert reply.status.code == pb.Code.OK
    assert [q.id for q in reply.message_queues] == [0, 1, 2, 3]
    q0 = reply.message_queues[0]
    assert q0.permission == pb.Permission.READ_WRITE and q0.broker.id == 0
    assert q0.broker.endpoints == endpoints
    assert q0.topic.resource_namespace == "acme"
    assert list(q0.accept_message_types) == [pb.MessageType.NORMAL]
    missing = v2.stub.QueryRoute(
        svc.QueryRouteRequest(topic=v2.res("nope"), endpoints=endpoints), metadata=v2.md
    )
    assert missing.status.code == pb.Code.TOPIC_NOT_FOUND


def test_telemetry_handshake(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    settings = pb.Settings(
        client_type=pb.ClientType.SIMPLE_CONSUMER,
        subscription=pb.Subscription(
            group=v2.res("g1"),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=v2.res("orders"),
                    expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
                )
            ],
        ),
        user_agent=pb.UA(language=pb.Language.PYTHON, version="5.1.2"),
    )
    done = threading.Event()

    def commands():
        yield svc.TelemetryCommand(settings=settings)
        done.wait(10)

    stream = v2.stub.Telemetry(commands(), metadata=v2.md, timeout=10)
    reply = next(stream)
    assert reply.status.code == pb.Code.OK
    assert reply.settings.subscription.receive_batch_size == 32
    assert reply.settings.subscription.long_polling_timeout.seconds == 20
    assert reply.settings.backoff_policy.max_attempts == 16
    assert not reply.settings.metric.on
    clients = admin.list_clients()
    assert any(
        c.client_id == v2.client_id and c.group == "acme%g1" and c.language == "PYTHON" for c in clients
    )
    done.set()
    stream.cancel()


def test_send_receive_ack(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    sent = v2.send("orders", b"payload", tag="t1", keys=("k1", "k2"))
    assert sent.status.code == pb.Code.OK and len(sent.entries) == 1
    responses = v2.receive("g1", "orders")
    assert status_code(responses) == pb.Code.OK
    assert responses[-1].WhichOneof("content") == "delivery_timestamp"
    [msg] = messages(responses)
    sp = msg.system_properties
    assert msg.body == b"payload" and sp.message_id == sent.entries[0].message_id
    assert sp.tag == "t1" and list(sp.keys) == ["k1", "k2"]
    assert sp.delivery_attempt == 1 and sp.receipt_handle
    # SHA-1, upper-case hex: what every official client checks as it checks MD5 (consume.py)
    assert sp.body_digest.type == pb.DigestType.SHA1
    assert sp.body_digest.checksum == hashlib.sha1(b"payload").hexdigest().upper()
    assert (
        sp.HasField("store_timestamp") and sp.HasField("queue_offset") and sp.HasField("invisible_duration")
    )
    assert msg.topic.resource_namespace == "acme" and msg.topic.name == "orders"
    assert v2.ack("g1", "orders", msg).status.code == pb.Code.OK
    # the handle is now stale
    assert v2.ack("g1", "orders", msg).status.code == pb.Code.INVALID_RECEIPT_HANDLE
    assert status_code(v2.receive("g1", "orders", poll_s=1)) == pb.Code.MESSAGE_NOT_FOUND


def test_one_ack_for_a_receive_across_queues_with_a_repeated_entry(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)  # four queues
    sent = [
        pb.Message(
            topic=v2.res("orders"),
            body=f"m{i}".encode(),
            system_properties=pb.SystemProperties(
                message_id=f"ID-{i}", message_type=pb.NORMAL, queue_id=i % 4
            ),
        )
        for i in range(12)
    ]
    assert (
        v2.stub.SendMessage(svc.SendMessageRequest(messages=sent), metadata=v2.md).status.code == pb.Code.OK
    )
    got = messages(v2.receive("g1", "orders", batch=32))
    assert len(got) == 12 and {m.system_properties.queue_id for m in got} == {0, 1, 2, 3}
    entries = [
        svc.AckMessageEntry(
            message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
        )
        for m in [*got, got[3]]  # the fourth twice: the second is found acked, as in two calls
    ]
    reply = v2.stub.AckMessage(
        svc.AckMessageRequest(group=v2.res("g1"), topic=v2.res("orders"), entries=entries), metadata=v2.md
    )
    assert reply.status.code == pb.Code.MULTIPLE_RESULTS
    codes = [e.status.code for e in reply.entries]
    assert codes == [pb.Code.OK] * 12 + [pb.Code.INVALID_RECEIPT_HANDLE]
    assert [e.message_id for e in reply.entries] == [e.message_id for e in entries]
    # every message of every queue is acked: nothing comes back, none is in flight, no lag
    assert status_code(v2.receive("g1", "orders", poll_s=1)) == pb.Code.MESSAGE_NOT_FOUND
    stats = admin.group_stats("acme%g1")
    assert stats.in_flight == 0 and stats.lag_messages == 0


def test_a_handle_acked_under_another_group_is_refused_and_stays_in_flight(
    admin: BrokerAdminClient, v2: V2
) -> None:
    _setup(admin)
    admin.create_group("g2", namespace="acme")
    for i in range(2):
        v2.send("orders", f"m{i}".encode())
    got = messages(v2.receive("g1", "orders", batch=32))
    assert len(got) == 2
    entries = [
        svc.AckMessageEntry(
            message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
        )
        for m in got
    ]
    reply = v2.stub.AckMessage(
        svc.AckMessageRequest(group=v2.res("g2"), topic=v2.res("orders"), entries=entries), metadata=v2.md
    )
    # every entry refused alike: the top-level status is theirs, not MULTIPLE_RESULTS
    assert reply.status.code == pb.Code.INVALID_RECEIPT_HANDLE
    assert "another group" in reply.status.message
    assert [e.status.code for e in reply.entries] == [pb.Code.INVALID_RECEIPT_HANDLE] * 2
    assert admin.group_stats("acme%g1").in_flight == 2
    # the group that received them still acks them with the same handles
    assert all(v2.ack("g1", "orders", m).status.code == pb.Code.OK for m in got)
    assert admin.group_stats("acme%g1").in_flight == 0


def test_invisibility_and_redelivery(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    v2.send("orders", b"again")
    [first] = messages(v2.receive("g1", "orders", invisible_s=1))
    assert first.system_properties.delivery_attempt == 1
    assert messages(v2.receive("g1", "orders", poll_s=0.5)) == []
    [second] = messages(v2.receive("g1", "orders", poll_s=4))
    assert second.system_properties.delivery_attempt == 2
    assert second.system_properties.message_id == first.system_properties.message_id
    assert v2.ack("g1", "orders", first).status.code == pb.Code.INVALID_RECEIPT_HANDLE
    assert v2.ack("g1", "orders", second).status.code == pb.Code.OK


def test_change_invisible_duration_issues_new_handle(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    v2.send("orders")
    [msg] = messages(v2.receive("g1", "orders"))
    request = svc.ChangeInvisibleDurationRequest(
        group=v2.res("g1"),
        topic=v2.res("orders"),
        receipt_handle=msg.system_properties.receipt_handle,
        message_id=msg.system_properties.message_id,
    )
    request.invisible_duration.FromSeconds(30)
    reply = v2.stub.ChangeInvisibleDuration(request, metadata=v2.md)
    assert reply.status.code == pb.Code.OK and reply.receipt_handle
    assert v2.ack("g1", "orders", msg).status.code == pb.Code.INVALID_RECEIPT_HANDLE
    msg.system_properties.receipt_handle = reply.receipt_handle
    assert v2.ack("g1", "orders", msg).status.code == pb.Code.OK
    forged = msg.system_properties.receipt_handle[:-3] + "AAA"
    msg.system_properties.receipt_handle = forged
    assert v2.ack("g1", "orders", msg).status.code == pb.Code.INVALID_RECEIPT_HANDLE


def test_groups_independent_and_tag_filter(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    admin.create_group("g2", namespace="acme")
    v2.send("orders", b"a", tag="red")
    v2.send("orders", b"b", tag="blue")
    got1 = sorted(m.body for m in messages(v2.receive("g1", "orders")))
    got2 = [m.body for m in messages(v2.receive("g2", "orders", expression="blue||green"))]
    assert got1 == [b"a", b"b"]
    assert got2 == [b"b"]


def test_long_poll_woken_by_send(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    result: dict[str, object] = {}

    def poll() -> None:
        started = time.monotonic()
        result["responses"] = v2.receive("g1", "orders", poll_s=15)
        result["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(1.0)
    v2.send("orders", b"wake")
    thread.join(20)
    assert [m.body for m in messages(result["responses"])] == [b"wake"]  # type: ignore[arg-type]
    assert result["elapsed"] < 5  # type: ignore[operator]


def test_offsets_rpcs(admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin, queues=1)
    for i in range(3):
        v2.send("orders", f"m{i}".encode())
    mq = pb.MessageQueue(topic=v2.res("orders"), id=0)
    begin = v2.stub.QueryOffset(
        svc.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.QueryOffsetPolicy.BEGINNING),
        metadata=v2.md,
    )
    end = v2.stub.QueryOffset(
        svc.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.QueryOffsetPolicy.END), metadata=v2.md
    )
    assert (begin.offset, end.offset) == (0, 3)
    assert (
        v2.stub.UpdateOffset(
            svc.UpdateOffsetRequest(group=v2.res("g1"), message_queue=mq, offset=2), metadata=v2.md
        ).status.code
        == pb.Code.OK
    )
    assert (
        v2.stub.GetOffset(svc.GetOffsetRequest(group=v2.res("g1"), message_queue=mq), metadata=v2.md).offset
        == 2
    )
    assert [m.body for m in messages(v2.receive("g1", "orders"))] == [b"m2"]
    pull = list(
        v2.stub.PullMessage(
            svc.PullMessageRequest(group=v2.res("g1"), message_queue=mq, offset=1, batch_size=10),
            metadata=v2.md,
        )
    )
    assert [r.message.body for r in pull if r.WhichOneof("content") == "message"] == [b"m1", b"m2"]
    assert pull[-1].next_offset == 3


def test_admin_crud_persists_across_restart(broker: BrokerProcess, admin: BrokerAdminClient) -> None:
    admin.create_topic("t1", namespace="acme", queue_count=2, message_type="FIFO")
    admin.create_group("g9", namespace="acme", max_delivery_attempts=3, retry_delays_ms=[1000, 2000])
    with pytest.raises(BrokerAdminError) as exc:
        admin.create_topic("acme%t1")
    assert exc.value.code == "ALREADY_EXISTS"
    admin.update_topic("acme%t1", queue_count=4)
    admin.create_topic("gone", queue_count=1)
    admin.delete_topic("gone")
    assert broker.stop() == 0
    broker.start()
    with BrokerAdminClient(broker.target) as fresh:
        assert [(t.name, t.queue_count, t.message_type) for t in fresh.list_topics()] == [("acme%t1", 4, 2)]
        group = fresh.get_group("acme%g9")
        assert group.max_delivery_attempts == 3 and list(group.retry_policy.customized.delays_ms) == [
            1000,
            2000,
        ]
        with pytest.raises(BrokerAdminError):
            fresh.get_topic("gone")


def test_in_flight_survives_restart_and_stats(broker: BrokerProcess, admin: BrokerAdminClient) -> None:
    _setup(admin, queues=1)
    client = V2(broker.target, namespace="acme")
    client.send("orders", b"x")
    client.send("orders", b"y")
    [a, b] = messages(client.receive("g1", "orders", invisible_s=30))  # outlasts a slow restart
    client.ack("g1", "orders", b)
    stats = admin.group_stats("acme%g1", "acme%orders")
    assert (stats.queues[0].committed_offset, stats.queues[0].in_flight, stats.lag_messages) == (0, 1, 2)
    client.close()
    assert broker.stop() == 0
    broker.start()
    client = V2(broker.target, namespace="acme")
    assert messages(client.receive("g1", "orders", poll_s=0.5)) == []  # still invisible
    assert client.ack("g1", "orders", a).status.code == pb.Code.OK  # handle still valid
    with BrokerAdminClient(broker.target) as fresh:
        stats = fresh.group_stats("acme%g1", "acme%orders")
        assert (stats.queues[0].committed_offset, stats.queues[0].in_flight, stats.lag_messages) == (2, 0, 0)
        topic_stats = fresh.topic_stats("acme%orders")
        assert topic_stats.queues[0].max_offset == 2 and topic_stats.queues[0].last_store_time_ms > 0
    client.close()


def test_dead_letter_after_max_attempts(admin: BrokerAdminClient, v2: V2) -> None:
    admin.create_topic("orders", namespace="acme", queue_count=1)
    admin.create_group("g1", namespace="acme", max_delivery_attempts=2)
    v2.send("orders", b"poison")
    assert messages(v2.receive("g1", "orders", invisible_s=1))[0].system_properties.delivery_attempt == 1
    assert (
        messages(v2.receive("g1", "orders", invisible_s=1, poll_s=4))[0].system_properties.delivery_attempt
        == 2
    )
    assert messages(v2.receive("g1", "orders", poll_s=3)) == []
    assert admin.topic_stats("%DLQ%acme%g1").queues[0].max_offset == 1


def test_bad_input_keeps_serving(broker: BrokerProcess, admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    assert v2.send("missing").status.code == pb.Code.TOPIC_NOT_FOUND
    assert v2.send("orders", b"x" * (4 * 1024 * 1024 + 1)).status.code == pb.Code.MESSAGE_BODY_TOO_LARGE
    assert v2.send("orders", b"").status.code == pb.Code.MESSAGE_BODY_EMPTY
    assert v2.send("orders", tag="a||b").status.code == pb.Code.ILLEGAL_MESSAGE_TAG
    assert v2.send("bad name!").status.code == pb.Code.ILLEGAL_TOPIC
    fifo = pb.Message(
        topic=v2.res("orders"),
        body=b"f",
        system_properties=pb.SystemProperties(
            message_id="X1", message_type=pb.MessageType.FIFO, message_group="g"
        ),
    )
    reply = v2.stub.SendMessage(svc.SendMessageRequest(messages=[fifo]), metadata=v2.md)
    assert reply.status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    # proto3 enums are open: a type number no release defines arrives as sent
    unknown = pb.Message(
        topic=v2.res("orders"), body=b"u", system_properties=pb.SystemProperties(message_id="X2")
    )
    unknown.system_properties.message_type = 29  # type: ignore[assignment]
    reply = v2.stub.SendMessage(svc.SendMessageRequest(messages=[unknown]), metadata=v2.md)
    assert (reply.status.code, reply.status.message) == (pb.Code.BAD_REQUEST, "unknown message_type 29")
    with pytest.raises(grpc.RpcError) as exc:
        v2.send("orders", b"x" * (40 * 1024 * 1024))
    assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    garbage = v2.channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage")
    with pytest.raises(grpc.RpcError):
        garbage(b"\xff\xfe garbage \x00\x01", metadata=v2.md, timeout=5)
    assert (
        v2.ack(
            "g1", "orders", pb.Message(system_properties=pb.SystemProperties(receipt_handle="junk"))
        ).status.code
        == pb.Code.INVALID_RECEIPT_HANDLE
    )
    assert status_code(v2.receive("nogroup", "orders", poll_s=0.2)) == pb.Code.CONSUMER_GROUP_NOT_FOUND
    assert v2.send("orders", b"still fine").status.code == pb.Code.OK
    assert broker.proc is not None and broker.proc.poll() is None


def test_sigterm_exits_zero_during_long_poll(broker: BrokerProcess, admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    # SIGUSR2 writes every thread's stack to the log (a node that looks stuck) and changes nothing
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while not any("Current thread" in line for line in broker.output) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # the rest of the main thread's stack
    dump = "".join(broker.output)
    assert "most recent call first" in dump and "dataplane/store/flush.py" in dump, dump[-3000:]
    assert v2.send("orders", b"after the dump").status.code == pb.Code.OK
    thread = threading.Thread(target=lambda: v2.receive("g1", "orders", poll_s=20), daemon=True)
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert broker.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 10


def test_forward_to_dead_letter_queue_and_client_termination(
    broker: BrokerProcess, admin: BrokerAdminClient, v2: V2
) -> None:
    """What a PushConsumer does when its listener gives up on a message, and when it shuts down."""
    from mqcloud.admin_messages import MessageAdminClient

    _setup(admin, queues=1)
    # a consumer announces itself with a heartbeat and is listed with its client id
    heartbeat = svc.HeartbeatRequest(group=v2.res("g1"), client_type=pb.ClientType.PUSH_CONSUMER)
    assert v2.stub.Heartbeat(heartbeat, metadata=v2.md, timeout=10).status.code == pb.Code.OK
    assert v2.client_id in {c.client_id for c in admin.list_clients("acme")}

    sent = v2.send("orders", b"poison").entries[0].message_id
    [msg] = messages(v2.receive("g1", "orders", invisible_s=2))
    forward = svc.ForwardMessageToDeadLetterQueueRequest(
        group=v2.res("g1"),
        topic=v2.res("orders"),
        receipt_handle=msg.system_properties.receipt_handle,
        message_id=sent,
        delivery_attempt=1,
        max_delivery_attempts=16,
    )
    answer = v2.stub.ForwardMessageToDeadLetterQueue(forward, metadata=v2.md, timeout=10)
    assert answer.status.code == pb.Code.OK, answer.status.message
    # it is in the group's DLQ, and never redelivered (not even after its invisible time)
    with MessageAdminClient(broker.target) as messages_admin:
        dead = messages_admin.list_dead_letters("acme%g1")
    assert [(d.message_id, d.body) for d in dead] == [(sent, b"poison")]
    assert messages(v2.receive("g1", "orders", poll_s=4)) == []
    # the handle is used up: forwarding it again is refused, the DLQ keeps one copy
    again = v2.stub.ForwardMessageToDeadLetterQueue(forward, metadata=v2.md, timeout=10)
    assert again.status.code == pb.Code.INVALID_RECEIPT_HANDLE
    assert admin.topic_stats("%DLQ%acme%g1").queues[0].max_offset == 1

    # a terminating client is forgotten at once
    bye = svc.NotifyClientTerminationRequest(group=v2.res("g1"))
    assert v2.stub.NotifyClientTermination(bye, metadata=v2.md, timeout=10).status.code == pb.Code.OK
    assert v2.client_id not in {c.client_id for c in admin.list_clients("acme")}


def test_runs_on_uvloop_by_default(broker: BrokerProcess, admin: BrokerAdminClient, v2: V2) -> None:
    _setup(admin)
    assert any("event loop: uvloop.Loop" in line for line in broker.output), "".join(broker.output)
    # and with the gRPC core switches set before grpc was imported (dataplane/grpc_core.py)
    switches = f"gRPC core experiments: {DEFAULT_GRPC_EXPERIMENTS}"
    assert any(switches in line for line in broker.output), "".join(broker.output)
    assert v2.send("orders", b"on uvloop").status.code == pb.Code.OK
    assert [m.body for m in messages(v2.receive("g1", "orders"))] == [b"on uvloop"]


@contextlib.contextmanager
def _broker_with(tmp_path: Path, env: dict[str, str]) -> Iterator[tuple[BrokerProcess, BrokerAdminClient]]:
    """A broker of its own, started with ``env`` (MQ_BROKER_* settings), and its admin client."""
    process = BrokerProcess(tmp_path / "broker", free_port(), env=env)
    process.start()
    admin = BrokerAdminClient(process.target)
    try:
        yield process, admin
    finally:
        admin.close()
        process.kill()


def _client(process: BrokerProcess) -> contextlib.closing[V2]:
    return contextlib.closing(V2(process.target, namespace="acme"))


def test_asyncio_loop_when_configured(tmp_path: Path) -> None:
    # given a broker started with the standard library's loop
    with (
        _broker_with(tmp_path, {"MQ_BROKER_EVENT_LOOP": "asyncio"}) as (process, admin),
        _client(process) as v2,
    ):
        # then it says so and serves the same calls
        loop_line = "event loop: asyncio.unix_events._UnixSelectorEventLoop"
        assert any(loop_line in line for line in process.output), "".join(process.output)
        _setup(admin)
        assert v2.send("orders", b"on asyncio").status.code == pb.Code.OK
        assert [m.body for m in messages(v2.receive("g1", "orders"))] == [b"on asyncio"]
        assert process.stop(signal.SIGTERM) == 0


def test_grpcs_own_defaults_when_the_setting_is_empty(tmp_path: Path) -> None:
    with (
        _broker_with(tmp_path, {"MQ_BROKER_GRPC_EXPERIMENTS": ""}) as (process, admin),
        _client(process) as v2,
    ):
        assert any("gRPC core experiments: grpcio's defaults" in line for line in process.output)
        _setup(admin)
        assert v2.send("orders", b"on the event engine").status.code == pb.Code.OK
        assert [m.body for m in messages(v2.receive("g1", "orders"))] == [b"on the event engine"]


def test_cpu_affinity_keeps_every_thread_of_the_node_on_its_cpus(tmp_path: Path) -> None:
    cpu = min(os.sched_getaffinity(0))
    process = BrokerProcess(tmp_path / "broker", free_port(), args=("--cpu-affinity", str(cpu)))
    process.start()
    admin = BrokerAdminClient(process.target)
    try:
        assert any(f"CPU affinity: {cpu}" in line for line in process.output)
        _setup(admin)
        with _client(process) as v2:
            assert v2.send("orders", b"on one cpu").status.code == pb.Code.OK
            assert [m.body for m in messages(v2.receive("g1", "orders"))] == [b"on one cpu"]
        assert process.proc is not None
        threads = [int(task.name) for task in Path(f"/proc/{process.proc.pid}/task").iterdir()]
        assert len(threads) > 2  # the loop's, gRPC's poller and the store's own at least
        assert {tid: os.sched_getaffinity(tid) for tid in threads} == {tid: {cpu} for tid in threads}
    finally:
        admin.close()
        process.kill()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a machine with 2 CPUs or more")
def test_a_node_keeps_its_event_loop_and_grpcs_poller_on_one_cpu_and_the_rest_anywhere(
    tmp_path: Path,
) -> None:
    """loop_cpu defaults to auto: the loop's thread and gRPC's polling thread share one CPU; the
    store's threads and every other run on all the CPUs the process has."""
    process = BrokerProcess(tmp_path / "broker", free_port())
    process.start()
    admin = BrokerAdminClient(process.target)
    try:
        line = next(
            line for line in process.output if "the event loop and gRPC's polling thread on CPU" in line
        )
        cpu = int(line.rsplit(" ", 1)[1])
        _setup(admin)
        with _client(process) as v2:
            assert v2.send("orders", b"loop and poller together").status.code == pb.Code.OK
            assert [m.body for m in messages(v2.receive("g1", "orders"))] == [b"loop and poller together"]
        assert process.proc is not None
        pid = process.proc.pid
        threads = {
            int(task.name): os.sched_getaffinity(int(task.name))
            for task in Path(f"/proc/{pid}/task").iterdir()
        }
        everywhere = os.sched_getaffinity(0)
        assert threads.pop(pid) == {cpu}  # the main thread runs the event loop
        kept = [tid for tid, cpus in threads.items() if cpus == {cpu}]
        assert len(kept) == 1  # gRPC's polling thread
        assert len(threads) > 3 and all(
            cpus == everywhere for tid, cpus in threads.items() if tid not in kept
        )
    finally:
        admin.close()
        process.kill()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a machine with 2 CPUs or more")
def test_nodes_of_one_host_keep_their_loops_on_different_cpus(tmp_path: Path) -> None:
    """auto: each node takes the CPU the fewest others noted in the host's placements file; one that
    stops takes its line out."""
    placements = tmp_path / "placements"
    env = {"MQ_BROKER_LOOP_CPU_PLACEMENTS": str(placements)}
    nodes = [BrokerProcess(tmp_path / f"broker{i}", free_port(), env=env) for i in range(2)]
    try:
        for node in nodes:
            node.start()
        cpus = []
        for node in nodes:
            assert node.proc is not None
            line = next(line for line in node.output if "gRPC's polling thread on CPU" in line)
            cpus.append(int(line.rsplit(" ", 1)[1]))
            assert os.sched_getaffinity(node.proc.pid) == {cpus[-1]}  # the loop's thread
        assert cpus[0] != cpus[1]
        noted = sorted(line.split()[::2] for line in placements.read_text().splitlines())
        assert noted == sorted([str(node.proc.pid), str(cpu)] for node, cpu in zip(nodes, cpus, strict=True))  # type: ignore[union-attr]
        assert nodes[0].stop() == 0
        assert placements.read_text().split()[::2] == [str(nodes[1].proc.pid), str(cpus[1])]  # type: ignore[union-attr]
    finally:
        for node in nodes:
            node.kill()


def test_cpu_affinity_beyond_the_machine_is_refused(tmp_path: Path) -> None:
    missing = max(os.sched_getaffinity(0)) + 1
    process = BrokerProcess(tmp_path / "broker", free_port(), env={"MQ_BROKER_CPU_AFFINITY": f"0,{missing}"})
    with pytest.raises(RuntimeError, match=rf"(?s)invalid broker settings.*CPU {missing} is not one"):
        process.start()
    assert process.proc is not None and process.proc.wait(10) == 2


def test_unknown_event_loop_is_refused(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "broker", free_port(), env={"MQ_BROKER_EVENT_LOOP": "tokio"})
    with pytest.raises(RuntimeError, match=r"(?s)invalid broker settings.*event_loop.*uvloop. or .asyncio"):
        process.start()
    assert process.proc is not None and process.proc.wait(10) == 2


def _handle_version(message: pb.Message) -> str:
    body = message.system_properties.receipt_handle.split(".")[0]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).split(b"|")[0].decode()


def test_version_1_receipt_handles_during_a_rolling_upgrade(tmp_path: Path) -> None:
    # given a broker told to issue version-1 handles (nodes not yet upgraded verify only those)
    with _broker_with(tmp_path, {"MQ_BROKER_RECEIPT_HANDLE_VERSION": "1"}) as (process, admin):
        _setup(admin)
        with _client(process) as v2:
            v2.send("orders", b"one")
            v2.send("orders", b"two")
            first = messages(v2.receive("g1", "orders", batch=1))
        assert [_handle_version(m) for m in first] == ["1"]
        # then, restarted as usual (version 2), it still acks the version-1 handle issued before,
        # and issues version 2 again
        assert process.stop(signal.SIGTERM) == 0
        process.env = {}
        process.start()
        with _client(process) as v2:
            assert v2.ack("g1", "orders", first[0]).status.code == pb.Code.OK
            [second] = messages(v2.receive("g1", "orders", batch=1))
            assert _handle_version(second) == "2" and second.body == b"two"
            assert v2.ack("g1", "orders", second).status.code == pb.Code.OK


def test_unknown_receipt_handle_version_is_refused(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "broker", free_port(), env={"MQ_BROKER_RECEIPT_HANDLE_VERSION": "3"})
    with pytest.raises(RuntimeError, match=r"(?s)invalid broker settings.*receipt_handle_version"):
        process.start()
