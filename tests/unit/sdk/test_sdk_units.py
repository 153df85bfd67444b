"""SDK pieces that need no network: signing, error mapping, ids, backoff, fault avoidance."""

from __future__ import annotations

import gzip
import hashlib
import hmac
import socket
import time
import zlib
from datetime import UTC, datetime, timedelta, timezone

import pytest
from google.protobuf.duration_pb2 import Duration

from mqcloud import ClientConfig, Credentials, Message
from mqcloud import errors as e
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from mqcloud.backoff import RetryBackoff
from mqcloud.config import endpoints_key, parse_endpoints
from mqcloud.fault import LatencyFaultTolerance, select_queue
from mqcloud.message import MessageView, generate_message_id
from mqcloud.producer import fifo_queue
from mqcloud.signing import build_metadata, format_datetime, sign
from tests.conftest import ManualClock


def test_signature_golden_value() -> None:
    # HMAC-SHA1("secret", "20240102T030405Z"), computed independently
    want = hmac.new(b"secret", b"20240102T030405Z", hashlib.sha1).hexdigest()
    assert sign("secret", "20240102T030405Z") == want


def test_signature_fixed_hex() -> None:
    assert sign("key", "The quick brown fox jumps over the lazy dog") == (
        "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9"
    )


def test_date_time_is_utc() -> None:
    local = datetime(2024, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    assert format_datetime(local) == "20240102T030405Z"


def test_metadata_headers() -> None:
    cfg = ClientConfig("127.0.0.1:8081", Credentials("AK", "SK", "tok"), namespace="acme")
    md = dict(build_metadata(cfg, "cid", now=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), request_id="r"))
    assert md["x-mq-namespace"] == "acme"
    assert md["x-mq-date-time"] == "20240102T030405Z"
    assert md["x-mq-client-id"] == "cid"
    assert md["x-mq-session-token"] == "tok"
    assert md["authorization"] == (
        "MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, "
        f"Signature={sign('SK', '20240102T030405Z')}"
    )


def test_no_authorization_without_credentials() -> None:
    md = dict(build_metadata(ClientConfig("h:1"), "cid"))
    assert "authorization" not in md
    assert md["x-mq-namespace"] == ""


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (40000, e.BadRequestError),
        (40013, e.BadRequestError),
        (40100, e.UnauthorizedError),
        (40200, e.PaymentRequiredError),
        (40300, e.ForbiddenError),
        (40402, e.NotFoundError),
        (40403, e.NotFoundError),
        (40800, e.RequestTimeoutError),
        (41301, e.PayloadTooLargeError),
        (41302, e.PayloadEmptyError),
        (42900, e.TooManyRequestsError),
        (43101, e.HeaderTooLargeError),
        (50001, e.InternalError),
        (50401, e.ProxyTimeoutError),
        (50100, e.UnsupportedError),
        (50500, e.UnsupportedError),
        (60000, e.UnsupportedError),
    ],
)
def test_error_mapping(code: int, cls: type[e.MQClientError]) -> None:
    with pytest.raises(cls) as info:
        e.check_status(pb.Status(code=code, message="m"))  # type: ignore[arg-type]
    assert info.value.code == code


@pytest.mark.parametrize("code", [20000, 30000, 40401])
def test_success_codes(code: int) -> None:
    e.check_status(pb.Status(code=code))  # type: ignore[arg-type]


def test_missing_status_is_illegal_state() -> None:
    with pytest.raises(e.IllegalStateError):
        e.check_status(pb.Status())
    with pytest.raises(e.IllegalStateError):
        e.check_status(None)


def test_retriable() -> None:
    assert e.is_retriable(e.TransportError("x", "UNAVAILABLE"))
    assert e.is_retriable(e.error_for_code(50001))
    assert e.is_retriable(e.error_for_code(42900))
    assert not e.is_retriable(e.error_for_code(40402))
    assert not e.is_retriable(e.error_for_code(40100))


def test_message_id_format() -> None:
    a, b = generate_message_id(), generate_message_id()
    assert len(a) == 34 and a.startswith("01") and a == a.upper()
    int(a, 16)
    assert a != b
    # seconds since 2021-01-01 sit at hex [18:26]
    mid = generate_message_id(now=datetime(2021, 1, 1, 0, 1, tzinfo=UTC).timestamp())
    assert int(mid[18:26], 16) == 60


def test_backoff_exponential_and_customized() -> None:
    b = RetryBackoff(max_attempts=5, initial=0.01, maximum=1.0, multiplier=2.0)
    assert [b.delay(i) for i in (1, 2, 3)] == [0.01, 0.02, 0.04]
    assert b.delay(20) == 1.0
    c = RetryBackoff(customized=(1, 5, 10))
    assert [c.delay(i) for i in (1, 2, 3, 4, 9)] == [1, 5, 10, 10, 10]


def test_backoff_from_settings() -> None:
    policy = pb.RetryPolicy(
        max_attempts=17,
        customized_backoff=pb.CustomizedBackoff(next=[Duration(seconds=1), Duration(seconds=5)]),
    )
    b = RetryBackoff.from_pb(policy)
    assert b.max_attempts == 17 and b.delay(1) == 1 and b.delay(2) == 5
    policy = pb.RetryPolicy(
        max_attempts=3,
        exponential_backoff=pb.ExponentialBackoff(
            initial=Duration(nanos=10_000_000), max=Duration(seconds=1), multiplier=2
        ),
    )
    b = RetryBackoff.from_pb(policy)
    assert b.max_attempts == 3 and b.delay(1) == pytest.approx(0.01) and b.delay(30) == 1.0


def test_fault_tolerance_isolates_slow_and_failed_endpoints() -> None:
    clock = ManualClock(100.0)
    f = LatencyFaultTolerance(clock)
    f.update("a:1", 10)
    assert f.is_available("a:1")
    f.update("b:1", 600)  # >= 550 ms -> 30 s out
    assert not f.is_available("b:1")
    clock.now += 31
    assert f.is_available("b:1")
    f.update("c:1", 5, failed=True)
    assert not f.is_available("c:1")
    assert LatencyFaultTolerance.isolation_ms(20000) == 600000


def test_select_queue_prefers_healthy_and_other_broker() -> None:
    clock = ManualClock(100.0)
    f = LatencyFaultTolerance(clock)
    queues = [("b1", "a:1"), ("b2", "b:1"), ("b3", "c:1")]

    def pick(start: int, avoid: str | None = None) -> tuple[str, str]:
        return select_queue(queues, start, lambda q: q[1], lambda q: q[0], f, avoid)

    assert pick(0) == ("b1", "a:1")
    assert pick(0, avoid="b1") == ("b2", "b:1")
    f.update("a:1", 0, failed=True)
    assert pick(0) == ("b2", "b:1")
    f.update("b:1", 0, failed=True)
    f.update("c:1", 0, failed=True)
    clock.now += 1
    f.update("c:1", 3000)  # back sooner than a and b? 180 s vs 30 s: a/b return first
    assert pick(2) in (("b1", "a:1"), ("b2", "b:1"))


def test_fifo_queue_matches_official_client() -> None:
    queues = [pb.MessageQueue(id=i) for i in range(8)]
    h = int.from_bytes(hashlib.sha256(b"order-42").digest(), "big")
    assert fifo_queue(queues, "order-42").id == h % 8


def test_parse_endpoints() -> None:
    assert parse_endpoints("http://a:1; b:2") == [("a", 1), ("b", 2)]
    assert ClientConfig("127.0.0.1:80").access_point().scheme == pb.AddressScheme.IPv4
    assert ClientConfig("host.example:80").access_point().scheme == pb.AddressScheme.DOMAIN_NAME
    assert endpoints_key(ClientConfig("127.0.0.1:80").access_point()) == "127.0.0.1:80"
    with pytest.raises(ValueError):
        parse_endpoints("nope")


def test_message_to_and_from_pb_roundtrip() -> None:
    m = Message("t", b"body", tag="a", keys=["k1", "k2"], properties={"p": "v"})
    p = m.to_pb("ns", "01AB", 3)
    assert p.topic.resource_namespace == "ns" and p.system_properties.queue_id == 3
    assert p.system_properties.message_type == pb.MessageType.NORMAL
    p.system_properties.body_digest.type = pb.DigestType.MD5
    p.system_properties.body_digest.checksum = hashlib.md5(b"body").hexdigest().upper()
    p.system_properties.delivery_attempt = 2
    v = MessageView.from_pb(p, "h:1")
    assert (v.body, v.tag, v.keys, v.properties, v.delivery_attempt, v.corrupted) == (
        b"body",
        "a",
        ["k1", "k2"],
        {"p": "v"},
        2,
        False,
    )
    assert v.born_timestamp == p.system_properties.born_timestamp.ToMilliseconds() / 1000
    p.system_properties.body_digest.checksum = "00"
    assert MessageView.from_pb(p, "h:1").corrupted
    assert Message("t", b"x", message_group="g").message_type == pb.MessageType.FIFO
    with pytest.raises(ValueError):
        Message("t", b"x", tag="a||b")


@pytest.mark.parametrize(
    "message",
    [
        Message("t", b"body"),
        Message("t", b"body", tag="a", keys=["k1", "k2"], properties={"p": "v", "q": "w"}),
        Message("t", b"\x00\xff" * 600, message_group="g-1", properties={"x": ""}),
        Message("t", b"later", tag="b", delivery_timestamp=1_900_000_000.25),
    ],
)
def test_to_pb_writes_what_the_constructors_built(message: Message) -> None:
    """``fill_pb`` writes fields in place; the message must be the one the constructors gave."""
    before = time.time_ns()
    built = message.to_pb("ns", "01AB", 3)
    after = time.time_ns()
    born = built.system_properties.born_timestamp
    assert before <= born.seconds * 1_000_000_000 + born.nanos <= after
    sp = pb.SystemProperties(
        keys=list(message.keys),
        message_id="01AB",
        body_encoding=pb.Encoding.IDENTITY,
        message_type=message.message_type,  # type: ignore[arg-type]
        born_timestamp=born,
        born_host=socket.gethostname(),
        queue_id=3,
    )
    if message.tag is not None:
        sp.tag = message.tag
    if message.message_group is not None:
        sp.message_group = message.message_group
    if message.delivery_timestamp is not None:
        sp.delivery_timestamp.FromMilliseconds(int(message.delivery_timestamp * 1000))
    reference = pb.Message(
        topic=pb.Resource(resource_namespace="ns", name="t"),
        user_properties=dict(message.properties),
        system_properties=sp,
        body=message.body,
    )
    assert built == reference
    assert built.SerializeToString(deterministic=True) == reference.SerializeToString(deterministic=True)
    # a request's messages are filled in place the same way
    request = svc.SendMessageRequest()
    message.fill_pb(request.messages.add(), "ns", "01AB", 3, pb.MessageType.TRANSACTION)
    assert request.messages[0].system_properties.message_type == pb.MessageType.TRANSACTION
    assert request.messages[0].body == message.body


@pytest.mark.parametrize(
    ("kind", "checksum"),
    [
        (pb.DigestType.MD5, hashlib.md5(b"payload").hexdigest().upper()),
        (pb.DigestType.SHA1, hashlib.sha1(b"payload").hexdigest()),
        (pb.DigestType.CRC32, f"{zlib.crc32(b'payload'):08X}"),
        (pb.DigestType.CRC32, str(zlib.crc32(b"payload"))),
    ],
)
def test_received_bodies_are_checked_against_each_digest_kind(kind: int, checksum: str) -> None:
    m = Message("t", b"payload").to_pb("", "01AB", 0)
    m.system_properties.body_digest.type = kind  # type: ignore[assignment]
    m.system_properties.body_digest.checksum = checksum
    assert not MessageView.from_pb(m, "h:1").corrupted
    m.system_properties.body_digest.checksum = "0" * len(checksum)
    assert MessageView.from_pb(m, "h:1").corrupted


def test_gzip_bodies_are_inflated_and_a_broken_one_is_marked_corrupted() -> None:
    m = Message("t", gzip.compress(b"inflated")).to_pb("", "01AB", 0)
    m.system_properties.body_encoding = pb.Encoding.GZIP
    view = MessageView.from_pb(m, "h:1")
    assert (view.body, view.corrupted) == (b"inflated", False)
    m.body = b"not gzip"
    assert MessageView.from_pb(m, "h:1").corrupted


async def test_batcher_bounds_batches_and_hands_errors_to_every_caller() -> None:
    import asyncio

    from mqcloud.batching import BatchingOptions, SendBatcher
    from mqcloud.message import Message, SendReceipt

    sent: list[list[Message]] = []

    async def send_batch(messages: list[Message]) -> list[SendReceipt]:
        sent.append(messages)
        if any(m.body == b"boom" for m in messages):
            raise RuntimeError("the broker said no")
        return [SendReceipt(message_id=m.body.decode(), offset=0, endpoint="e", queue_id=0) for m in messages]

    batcher = SendBatcher(BatchingOptions(max_delay_ms=5, max_messages=3, max_bytes=10), send_batch)
    futures = [batcher.add(Message("t", f"m{i}".encode())) for i in range(4)]  # 3 + 1 by count
    # m3 (2 bytes) + 8 bytes fit the 10-byte bound; 8 more do not: a new batch
    futures += [batcher.add(Message("t", b"x" * 8)) for _ in range(2)]
    assert [r.message_id for r in await asyncio.gather(*futures[:4])] == ["m0", "m1", "m2", "m3"]
    await asyncio.gather(*futures[4:])
    assert [len(b) for b in sent] == [3, 2, 1]
    failing = [batcher.add(Message("u", b"boom")), batcher.add(Message("u", b"ok"))]
    results = await asyncio.gather(*failing, return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    late = batcher.add(Message("t", b"z"))
    await batcher.flush()  # sent at once, not after the delay
    assert late.done() and late.result().message_id == "z"


async def test_batcher_collects_past_the_delay_while_max_in_flight_batches_are_unanswered() -> None:
    import asyncio

    from mqcloud.batching import BatchingOptions, SendBatcher
    from mqcloud.message import Message, SendReceipt

    sent: list[list[bytes]] = []
    answer = asyncio.Event()

    async def send_batch(messages: list[Message]) -> list[SendReceipt]:
        sent.append([m.body for m in messages])
        await answer.wait()  # a broker that has not answered yet
        return [SendReceipt(message_id=m.body.decode(), offset=0, endpoint="e", queue_id=0) for m in messages]

    options = BatchingOptions(max_delay_ms=1, max_messages=4, max_in_flight=1)
    batcher = SendBatcher(options, send_batch)
    first = batcher.add(Message("t", b"a"))
    await asyncio.sleep(0.01)  # its delay ran out: it went
    assert sent == [[b"a"]]
    waiting = []
    for body in (b"b", b"c"):
        waiting.append(batcher.add(Message("t", body)))
        await asyncio.sleep(0.01)  # past the delay, but one batch is unanswered: they wait
    assert sent == [[b"a"]]
    # a batch that is full goes whatever is in flight; another key has its own count
    full = [batcher.add(Message("t", body)) for body in (b"d", b"e")]
    other = batcher.add(Message("u", b"x"))
    await asyncio.sleep(0.01)
    assert sent == [[b"a"], [b"b", b"c", b"d", b"e"], [b"x"]]
    late = batcher.add(Message("t", b"f"))
    await asyncio.sleep(0.01)
    assert len(sent) == 3 and not late.done()
    # the first answers land: the waiting batch leaves at once
    answer.set()
    receipts = await asyncio.gather(first, *waiting, *full, other, late)
    assert [r.message_id for r in receipts] == list("abcdexf")
    assert sent[-1] == [b"f"]
    # flush sends a batch that waits for room at once
    answer.clear()
    blocked = batcher.add(Message("t", b"g"))
    await asyncio.sleep(0.01)
    held = batcher.add(Message("t", b"h"))
    await asyncio.sleep(0.01)
    assert sent[-1] == [b"g"]
    flushing = asyncio.ensure_future(batcher.flush())
    await asyncio.sleep(0.01)
    assert sent[-1] == [b"h"]
    answer.set()
    await flushing
    assert blocked.done() and held.done()
