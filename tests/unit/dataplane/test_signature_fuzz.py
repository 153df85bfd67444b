"""Fuzz the signature parser and the authenticator with random and mutated headers: the only
outcomes are a principal for a correctly signed request, or SignatureError / Unauthorized."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplane.auth import Authenticator, Unauthorized
from dataplane.auth.signature import SignatureError, parse_authorization, verify_signature
from dataplane.security_store import AccessKeyConfig, SecurityStore

DATE = "20250101T120000Z"
SECRET = "s3cret"
GOOD = (
    "MQv2-HMAC-SHA1 Credential=AK1/2025/x, SignedHeaders=x-mq-date-time, Signature="
    + hmac.new(SECRET.encode(), DATE.encode(), hashlib.sha1).hexdigest()
)


@given(st.text(max_size=300))
def test_parse_authorization_only_raises_signature_error(value: str) -> None:
    try:
        header = parse_authorization(value)
    except SignatureError:
        return
    assert value.strip().startswith("MQv2-HMAC-SHA1")
    assert "/" not in header.access_key


@given(st.text(max_size=60), st.text(max_size=60), st.text(max_size=80))
def test_verify_signature_is_false_not_an_error(secret: str, date: str, signature: str) -> None:
    assert verify_signature(secret, date, signature) in (True, False)


def _mutations() -> st.SearchStrategy[str]:
    """The good header with a slice replaced, deleted or duplicated."""

    @st.composite
    def mutate(draw: st.DrawFn) -> str:
        i = draw(st.integers(0, len(GOOD)))
        j = draw(st.integers(i, len(GOOD)))
        middle = draw(st.one_of(st.just(""), st.text(max_size=20), st.just(GOOD[i:j] * 2)))
        return GOOD[:i] + middle + GOOD[j:]

    return mutate()


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    authorization=st.one_of(_mutations(), st.text(max_size=200), st.binary(max_size=200)),
    date=st.one_of(st.just(DATE), st.text(max_size=30), st.binary(max_size=30)),
)
def test_authenticator_admits_only_the_right_signature(
    tmp_path: Path, authorization: str | bytes, date: str | bytes
) -> None:
    store = SecurityStore(tmp_path)
    store.put_access_key(AccessKeyConfig("AK1", SECRET, "acme"))
    auth = Authenticator(store, dev_mode=False)
    metadata = [("x-mq-date-time", date), ("authorization", authorization)]
    try:
        principal = auth.authenticate(metadata)
    except Unauthorized:
        return
    # admitted: it must be the tenant's key with a valid signature over the date it sent
    assert principal is not None and (principal.access_key, principal.namespace) == ("AK1", "acme")
    text = authorization.decode(errors="replace") if isinstance(authorization, bytes) else authorization
    sent_date = date.decode(errors="replace") if isinstance(date, bytes) else date
    assert verify_signature(SECRET, sent_date, parse_authorization(text).signature)
