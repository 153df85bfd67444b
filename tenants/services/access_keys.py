"""Access keys: issue (secret shown once), rotate with overlap, revoke."""

from __future__ import annotations

import secrets
import string
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from tenants.choices import AccessKeyStatus, AuditAction
from tenants.constants import (
    ACCESS_KEY_ID_LENGTH,
    ACCESS_KEY_ID_PREFIX,
    ACCESS_KEY_ROTATION_OVERLAP,
    ACCESS_KEY_SECRET_BYTES,
)
from tenants.crypto import encrypt_secret
from tenants.errors import InvalidState
from tenants.models import AccessKey, Tenant
from tenants.services.audit import Actor
from tenants.services.provisioning import ResourceKind
from tenants.services.resources import create_resource, delete_resource, lock_tenant, update_resource

__all__ = (
    "create_access_key",
    "delete_access_key",
    "revoke_access_key",
    "rotate_access_key",
    "update_access_key",
)

_ID_ALPHABET = string.ascii_uppercase + string.digits


def _new_credentials() -> tuple[str, str]:
    key_id = ACCESS_KEY_ID_PREFIX + "".join(secrets.choice(_ID_ALPHABET) for _ in range(ACCESS_KEY_ID_LENGTH))
    return key_id, secrets.token_urlsafe(ACCESS_KEY_SECRET_BYTES)


def _issue(
    actor: Actor, tenant: Tenant, description: str, rotated_from: AccessKey | None
) -> tuple[AccessKey, str]:
    key_id, secret = _new_credentials()
    key = AccessKey(
        tenant=tenant,
        access_key=key_id,
        secret_encrypted=encrypt_secret(secret),
        description=description,
        rotated_from=rotated_from,
    )
    create_resource(actor, key, ResourceKind.ACCESS_KEY)
    return key, secret


@transaction.atomic
def create_access_key(actor: Actor, tenant: Tenant, description: str = "") -> tuple[AccessKey, str]:
    """Issue a key; the returned secret is the only time it leaves the control plane in the clear."""
    tenant = lock_tenant(tenant)
    return _issue(actor, tenant, description, None)


@transaction.atomic
def rotate_access_key(
    actor: Actor, key: AccessKey, overlap: timedelta = ACCESS_KEY_ROTATION_OVERLAP
) -> tuple[AccessKey, str]:
    """Issue a successor and keep the old key working until ``now + overlap``."""
    lock_tenant(key.tenant)
    if key.key_status != AccessKeyStatus.ACTIVE:
        raise InvalidState(f"Access key {key.access_key} is revoked; create a new key instead.")
    new_key, secret = _issue(actor, key.tenant, key.description, key)
    expires_at = timezone.now() + overlap
    if key.expires_at is None or key.expires_at > expires_at:
        update_resource(actor, key, {"expires_at": expires_at}, ResourceKind.ACCESS_KEY, AuditAction.ROTATE)
    return new_key, secret


@transaction.atomic
def revoke_access_key(actor: Actor, key: AccessKey) -> AccessKey:
    """Stop the key at once; brokers drop it on the next apply."""
    if key.key_status == AccessKeyStatus.REVOKED:
        return key
    changes = {"key_status": AccessKeyStatus.REVOKED, "revoked_at": timezone.now()}
    return update_resource(actor, key, changes, ResourceKind.ACCESS_KEY, AuditAction.REVOKE)


def update_access_key(actor: Actor, key: AccessKey, **changes: Any) -> AccessKey:
    """Change what may change on a key: its description."""
    return update_resource(
        actor, key, {"description": changes.get("description", key.description)}, ResourceKind.ACCESS_KEY
    )


def delete_access_key(actor: Actor, key: AccessKey) -> AccessKey:
    """Remove the key from brokers, then from the database."""
    return delete_resource(actor, key, ResourceKind.ACCESS_KEY)
