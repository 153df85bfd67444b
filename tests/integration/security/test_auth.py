"""Authentication and tenant isolation on a broker without development mode (issue 7)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from mqcloud import ClientConfig, Credentials, Message, Producer, SimpleConsumer
from mqcloud.admin_client import BrokerAdminClient, BrokerAdminError, secret_fingerprint
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.errors import ForbiddenError, UnauthorizedError
from tests.integration.broker.conftest import V2, BrokerProcess, messages, status_code

from .conftest import ADMIN_TOKEN, client, tenant

pytestmark = pytest.mark.integration

OK, UNAUTHORIZED, FORBIDDEN = pb.Code.OK, pb.Code.UNAUTHORIZED, pb.Code.FORBIDDEN


def _telemetry_status(v2: V2, settings: pb.Settings | None = None) -> int:
    settings = settings or pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[v2.res("orders")])
    )

    def commands() -> Iterator[svc.TelemetryCommand]:
        yield svc.TelemetryCommand(settings=settings)
        time.sleep(1.5)

    replies = list(v2.stub.Telemetry(commands(), metadata=v2.md, timeout=10))
    return replies[-1].status.code if replies else -1


def test_unsigned_wrong_secret_and_expired_keys_are_unauthorized(
    secure_broker: BrokerProcess, op: BrokerAdminClient
) -> None:
    ak, secret = tenant(op, "acme")
    op.put_access_key("AKold", secret_key="old", namespace="acme", expires_at_ms=int(time.time() * 1000) - 1)
    for credentials in (None, (ak, "wrong"), ("AKnobody", "x"), ("AKold", "old")):
        v2 = client(secure_broker, "acme", credentials)
        try:
            # unary calls, the receive stream and the Telemetry stream all answer UNAUTHORIZED
            reply = v2.stub.QueryRoute(svc.QueryRouteRequest(topic=v2.res("orders")), metadata=v2.md)
            assert reply.status.code == UNAUTHORIZED, credentials
            assert v2.send("orders").status.code == UNAUTHORIZED
            frames = v2.receive("billing", "orders", poll_s=0.2)
            assert status_code(frames) == UNAUTHORIZED
            assert frames[-1].WhichOneof("content") == "delivery_timestamp"
            assert _telemetry_status(v2) == UNAUTHORIZED
        finally:
            v2.close()
    # the right key works on every path
    v2 = client(secure_broker, "acme", (ak, secret))
    try:
        assert v2.send("orders", b"signed").status.code == OK
        (got,) = messages(v2.receive("billing", "orders", poll_s=2))
        assert got.body == b"signed"
        assert v2.ack("billing", "orders", got).status.code == OK
        assert _telemetry_status(v2) == OK
    finally:
        v2.close()


def test_our_sdk_signs_and_a_wrong_secret_raises(secure_broker: BrokerProcess, op: BrokerAdminClient) -> None:
    ak, secret = tenant(op, "acme")
    good = ClientConfig(secure_broker.target, credentials=Credentials(ak, secret), namespace="acme")
    with Producer(good, topics=["orders"]) as producer:
        producer.send(Message("orders", b"via-sdk"))
    with SimpleConsumer(good, "billing", {"orders": "*"}, await_duration=2) as consumer:
        received = consumer.receive(16, 30)
        assert [m.body for m in received] == [b"via-sdk"]
        consumer.ack(received[0])
    bad = ClientConfig(secure_broker.target, credentials=Credentials(ak, "nope"), namespace="acme")
    with pytest.raises(UnauthorizedError), Producer(bad, topics=["orders"]) as producer:
        producer.send(Message("orders", b"refused"))
    other = ClientConfig(secure_broker.target, credentials=Credentials(ak, secret), namespace="globex")
    with pytest.raises(ForbiddenError), Producer(other, topics=["orders"]) as producer:
        producer.send(Message("orders", b"refused"))


def _requests(res: Callable[[str], pb.Resource]) -> list[tuple[str, Any]]:
    """One request per v2 RPC, every resource named in the namespace ``res`` gives."""
    mq = pb.MessageQueue(topic=res("orders"), id=0)
    sp = pb.SystemProperties(message_id=uuid.uuid4().hex, message_type=pb.MessageType.NORMAL)
    return [
        ("QueryRoute", svc.QueryRouteRequest(topic=res("orders"))),
        (
            "SendMessage",
            svc.SendMessageRequest(
                messages=[pb.Message(topic=res("orders"), body=b"x", system_properties=sp)]
            ),
        ),
        ("QueryAssignment", svc.QueryAssignmentRequest(topic=res("orders"), group=res("billing"))),
        (
            "AckMessage",
            svc.AckMessageRequest(
                group=res("billing"),
                topic=res("orders"),
                entries=[svc.AckMessageEntry(message_id="m", receipt_handle="h")],
            ),
        ),
        (
            "ChangeInvisibleDuration",
            svc.ChangeInvisibleDurationRequest(
                group=res("billing"), topic=res("orders"), receipt_handle="h", message_id="m"
            ),
        ),
        (
            "ForwardMessageToDeadLetterQueue",
            svc.ForwardMessageToDeadLetterQueueRequest(
                group=res("billing"), topic=res("orders"), receipt_handle="h", message_id="m"
            ),
        ),
        ("UpdateOffset", svc.UpdateOffsetRequest(group=res("billing"), message_queue=mq, offset=0)),
        ("GetOffset", svc.GetOffsetRequest(group=res("billing"), message_queue=mq)),
        ("QueryOffset", svc.QueryOffsetRequest(message_queue=mq)),
        (
            "EndTransaction",
            svc.EndTransactionRequest(topic=res("orders"), message_id="m", transaction_id="t"),
        ),
        ("RecallMessage", svc.RecallMessageRequest(topic=res("orders"), recall_handle="h")),
        ("Heartbeat", svc.HeartbeatRequest(group=res("billing"), client_type=pb.ClientType.SIMPLE_CONSUMER)),
        ("NotifyClientTermination", svc.NotifyClientTerminationRequest(group=res("billing"))),
        ("ReceiveMessage", svc.ReceiveMessageRequest(group=res("billing"), message_queue=mq, batch_size=1)),
        ("PullMessage", svc.PullMessageRequest(group=res("billing"), message_queue=mq, batch_size=1)),
    ]


@pytest.mark.parametrize("style", ["header", "resource", "node"])
def test_a_key_never_reaches_another_tenant_through_any_rpc(
    secure_broker: BrokerProcess, op: BrokerAdminClient, style: str
) -> None:
    # given: tenants acme and globex with the same names, and a message in globex's topic
    acme = tenant(op, "acme")
    globex = tenant(op, "globex")
    owner = client(secure_broker, "globex", globex)
    assert owner.send("orders", b"globex-private").status.code == OK
    # when: acme's key names globex (header and resources / only resources / header + empty ns)
    header_ns = {"header": "globex", "resource": "acme", "node": "globex"}[style]
    intruder = client(secure_broker, header_ns, acme)
    res_ns = {"header": "globex", "resource": "globex", "node": ""}[style]

    def res(name: str) -> pb.Resource:
        return pb.Resource(resource_namespace=res_ns, name=name)

    try:
        # then: every RPC answers FORBIDDEN and nothing of globex is returned
        for rpc, request in _requests(res):
            call = getattr(intruder.stub, rpc)
            if rpc in ("ReceiveMessage", "PullMessage"):
                frames = list(call(request, metadata=intruder.md, timeout=10))
                assert status_code(frames) == FORBIDDEN, rpc
                assert messages(frames) == [], rpc
            else:
                reply = call(request, metadata=intruder.md, timeout=10)
                assert reply.status.code == FORBIDDEN, (rpc, reply.status)
                assert not getattr(reply, "message_queues", None), rpc
        settings = pb.Settings(
            client_type=pb.ClientType.SIMPLE_CONSUMER,
            subscription=pb.Subscription(
                group=res("billing"), subscriptions=[pb.SubscriptionEntry(topic=res("orders"))]
            ),
        )
        assert _telemetry_status(intruder, settings) == FORBIDDEN
        # and globex still has its message, untouched
        (kept,) = messages(owner.receive("billing", "orders", poll_s=2))
        assert kept.body == b"globex-private"
    finally:
        intruder.close()
        owner.close()


def test_admin_api_requires_the_operator_token(secure_broker: BrokerProcess, op: BrokerAdminClient) -> None:
    tenant(op, "acme")
    for token in (None, "wrong"):
        with BrokerAdminClient(secure_broker.target, token=token) as anonymous:
            for call in (
                anonymous.list_topics,
                anonymous.list_access_keys,
                lambda: anonymous.create_topic("x%y"),
            ):
                with pytest.raises(BrokerAdminError) as info:
                    call()
                assert info.value.code == grpc.StatusCode.UNAUTHENTICATED.name
    # listings carry fingerprints; the secret only when the operator asks for it
    (key,) = op.list_access_keys("acme")
    assert (key.secret_key, key.secret_fingerprint) == ("", secret_fingerprint("AKacme", "secret-of-acme"))
    (key,) = op.list_access_keys("acme", include_secrets=True)
    assert key.secret_key == "secret-of-acme"
    assert ADMIN_TOKEN not in "".join(secure_broker.output)  # never logged
