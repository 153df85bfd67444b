"""Units of issue 7: signatures, ACL evaluation, token buckets, usage records across restarts."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from dataplane.auth import Authenticator, Unauthorized
from dataplane.auth.acl import Access, evaluate
from dataplane.auth.signature import SignatureError, parse_authorization, verify_signature
from dataplane.metering import UsageMeter, requests_4k
from dataplane.quota import QuotaEnforcer, TokenBucket, TooManyRequests
from dataplane.security_store import (
    AccessKeyConfig,
    AclAction,
    AclConfig,
    AclDecision,
    AclPatternType,
    AclResourceType,
    QuotaConfig,
    SecurityStore,
)

DATE = "20250101T120000Z"


def _sig(secret: str) -> str:
    return hmac.new(secret.encode(), DATE.encode(), hashlib.sha1).hexdigest()


def test_signature_parse_and_verify_either_case() -> None:
    header = parse_authorization(
        f"MQv2-HMAC-SHA1 Credential=AK1/2025/x, SignedHeaders=x-mq-date-time, Signature={_sig('s').upper()}"
    )
    assert header.access_key == "AK1"
    assert verify_signature("s", DATE, header.signature)
    assert verify_signature("s", DATE, header.signature.lower())
    assert not verify_signature("other", DATE, header.signature)
    assert not verify_signature("s", DATE, "zz-not-hex")
    with pytest.raises(SignatureError):
        parse_authorization("Basic abc")


def test_authenticator_dev_mode_only_admits_anonymous(tmp_path: Path) -> None:
    store = SecurityStore(tmp_path)
    store.put_access_key(AccessKeyConfig("AK1", "s", "acme"))
    anonymous = [("authorization", "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=00")]
    assert Authenticator(store, dev_mode=True).authenticate(anonymous) is None
    with pytest.raises(Unauthorized):
        Authenticator(store, dev_mode=False).authenticate(anonymous)
    signed = [
        ("x-mq-date-time", DATE),
        (
            "authorization",
            f"MQv2-HMAC-SHA1 Credential=AK1, SignedHeaders=x-mq-date-time, Signature={_sig('s')}",
        ),
    ]
    for dev in (True, False):  # a wrong secret is refused even in development mode
        auth = Authenticator(store, dev_mode=dev)
        assert auth.authenticate(signed).namespace == "acme"  # type: ignore[union-attr]
        with pytest.raises(Unauthorized):
            auth.authenticate([signed[0], (signed[1][0], signed[1][1][:-4] + "0000")])


def _policy(name: str, decision: AclDecision, pattern: str = "", **kw: object) -> AclConfig:
    return AclConfig(
        name=name,
        namespace="acme",
        principal=str(kw.pop("principal", "AK1")),
        resource_type=kw.pop("rtype", AclResourceType.TOPIC),  # type: ignore[arg-type]
        resource_pattern=pattern,
        pattern_type=kw.pop("ptype", AclPatternType.LITERAL),  # type: ignore[arg-type]
        actions=kw.pop("actions", (AclAction.PUB,)),  # type: ignore[arg-type]
        source_cidrs=kw.pop("cidrs", ()),  # type: ignore[arg-type]
        decision=decision,
    )


@pytest.mark.parametrize(
    ("policies", "access", "ip", "allowed"),
    [
        pytest.param(
            [], Access(AclResourceType.TOPIC, "t", (AclAction.PUB,)), "1.2.3.4", True, id="no-policy"
        ),
        pytest.param(
            [
                _policy("a", AclDecision.ALLOW, "or", ptype=AclPatternType.PREFIXED),
                _policy("d", AclDecision.DENY, "orders"),
            ],
            Access(AclResourceType.TOPIC, "orders", (AclAction.PUB,)),
            "1.2.3.4",
            False,
            id="deny-wins",
        ),
        pytest.param(
            [_policy("a", AclDecision.ALLOW, "orders")],
            Access(AclResourceType.TOPIC, "payments", (AclAction.PUB,)),
            "1.2.3.4",
            False,
            id="allow-list",
        ),
        pytest.param(
            [_policy("a", AclDecision.ALLOW, "orders")],
            Access(AclResourceType.GROUP, "g", (AclAction.SUB,)),
            "1.2.3.4",
            True,
            id="topic-policies-leave-groups-open",
        ),
        pytest.param(
            [_policy("a", AclDecision.ALLOW, "", cidrs=("10.0.0.0/8",))],
            Access(AclResourceType.TOPIC, "t", (AclAction.PUB,)),
            "10.1.2.3",
            True,
            id="cidr-in",
        ),
        pytest.param(
            [_policy("a", AclDecision.ALLOW, "", cidrs=("10.0.0.0/8",))],
            Access(AclResourceType.TOPIC, "t", (AclAction.PUB,)),
            "::1",
            False,
            id="cidr-out",
        ),
        pytest.param(
            [_policy("a", AclDecision.ALLOW, "t", principal="AK2")],
            Access(AclResourceType.TOPIC, "x", (AclAction.PUB,)),
            "1.2.3.4",
            True,
            id="other-principal",
        ),
        pytest.param(
            [
                _policy("d", AclDecision.DENY, "t", actions=(AclAction.PUB,)),
                _policy("s", AclDecision.ALLOW, "t", actions=(AclAction.ALL,)),
            ],
            Access(AclResourceType.TOPIC, "t", (AclAction.PUB, AclAction.SUB)),
            "1.2.3.4",
            True,
            id="route-needs-either",
        ),
    ],
)
def test_acl_evaluation(policies: list[AclConfig], access: Access, ip: str, allowed: bool) -> None:
    assert evaluate(policies, "AK1", access, ip).allowed is allowed


def test_token_bucket_refills_caps_and_admits_one_oversized_request() -> None:
    bucket = TokenBucket(rate=10, capacity=10, now=0.0)
    assert bucket.fits(10, 0.0)
    bucket.debit(10)
    assert not bucket.fits(1, 0.05)
    assert bucket.fits(5, 0.5)
    assert bucket.refill(100.0) == 10  # capped
    assert bucket.fits(50, 100.0)  # a full bucket lets one large request through, into debt
    bucket.debit(50)
    assert not bucket.fits(1, 103.0)


def test_usage_meter_rewrites_a_minute_cumulatively_after_a_restart(tmp_path: Path) -> None:
    now = [1_700_000_010.0]
    meter = UsageMeter(tmp_path / "m", "b0", tmp_path, clock=lambda: now[0])
    meter.count_in("acme", [10, 5000])
    meter.count_call("acme", "SendMessage")
    first = meter.flush()
    # the process restarts within the same minute and counts more
    now[0] += 5
    meter = UsageMeter(tmp_path / "m", "b0", tmp_path, clock=lambda: now[0])
    meter.count_in("acme", [1])
    second = meter.flush()
    assert set(first).isdisjoint(second)  # a new file, never an overwrite
    records = [json.loads(line) for p in [*first, *second] for line in p.read_text().splitlines()]
    latest = max(records, key=lambda r: r["written_at"])
    assert len({r["id"] for r in records}) == 1
    assert (latest["messages_in"], latest["bytes_in"], latest["requests_in_4k"]) == (3, 5011, 1 + 2 + 1)
    assert latest["api_calls"] == {"SendMessage": 1}
    assert latest["minute"] == "2023-11-14T22:13:00Z"
    assert first[0].parent.as_posix().endswith("usage/date=2023-11-14/hour=22")
    assert requests_4k(0) == 1 and requests_4k(4096) == 1 and requests_4k(4097) == 2


def test_a_topic_named_two_ways_in_one_request_is_charged_once_for_all_its_messages(tmp_path: Path) -> None:
    # given: a topic limited to 10 messages a second, and a clock that stands still (no refill)
    store = SecurityStore(tmp_path)
    store.put_quota(QuotaConfig("acme", topic="acme%orders", limits={"produce_messages_per_s": 10}))
    quotas = QuotaEnforcer(store, clock=lambda: 0.0)
    # when: one request names it qualified (3 messages) and by its namespace (5 messages)
    quotas.admit_produce("acme", {("", "acme%orders"): (3, 300, 100), ("acme", "acme%orders"): (5, 500, 100)})
    # then: 8 were taken, so 2 more fit and a third does not
    quotas.admit_produce("acme", {("acme", "acme%orders"): (2, 200, 100)})
    with pytest.raises(TooManyRequests, match="produce_messages_per_s 10"):
        quotas.admit_produce("acme", {("acme", "acme%orders"): (1, 100, 100)})
