"""Replication key selection and proofs (dataplane/ha/auth.py) and the settings check behind them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dataplane.config import BrokerSettings
from dataplane.ha import auth


def test_key_sources_and_proofs() -> None:
    secret = auth.replication_key("s3cret", "token", False)
    assert secret == auth.replication_key("s3cret", None, True)  # ha_secret wins
    assert secret != auth.replication_key("other", None, False)
    from_token = auth.replication_key(None, "token", False)
    assert from_token not in (secret, auth.DEV_KEY, b"token")
    assert auth.replication_key(None, None, True) == auth.DEV_KEY
    with pytest.raises(auth.AuthError, match="MQ_BROKER_HA_SECRET"):
        auth.replication_key(None, None, False)
    server, client = auth.new_nonce(), auth.new_nonce()
    assert server != client and len(server) == auth.NONCE_BYTES
    proof = auth.replica_proof(secret, "g", server, client)
    assert auth.verify(proof, auth.replica_proof(secret, "g", server, client))
    # bound to the key, the group, both nonces and the role
    assert not auth.verify(proof, auth.replica_proof(from_token, "g", server, client))
    assert not auth.verify(proof, auth.replica_proof(secret, "h", server, client))
    assert not auth.verify(proof, auth.replica_proof(secret, "g", client, server))
    assert not auth.verify(proof, auth.master_proof(secret, "g", server, client))


def test_ha_settings_need_a_secret() -> None:
    with pytest.raises(ValidationError, match="replication secret"):
        BrokerSettings(controller="127.0.0.1:9878")
    BrokerSettings(controller="127.0.0.1:9878", ha_secret="s")
    BrokerSettings(controller="127.0.0.1:9878", admin_token="t")
    BrokerSettings(controller="127.0.0.1:9878", dev_mode=True)
    BrokerSettings()  # no HA, no secret needed
