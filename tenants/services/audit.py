"""The audit trail: every mutating service call records who did what, from where."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.forms.models import model_to_dict

from tenants.choices import AuditAction
from tenants.models import AuditEvent, Tenant

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

__all__ = ("Actor", "create_audited", "delete_audited", "record_event", "snapshot", "update_audited")

# Never written to the audit log, whatever the model.
_REDACTED_FIELDS = frozenset({"secret_encrypted", "signing_secret_encrypted", "password"})


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is acting: a user from a request, or the system (tasks, commands)."""

    user: AbstractBaseUser | AnonymousUser | None = None
    source_ip: str | None = None

    @property
    def name(self) -> str:
        if self.user is None or not self.user.is_authenticated:
            return "system"
        return str(self.user.get_username())


def snapshot(obj: models.Model) -> dict[str, Any]:
    """A JSON-safe dict of an object's editable fields plus its id, without secrets."""
    data = model_to_dict(obj)
    data = {k: v for k, v in data.items() if k not in _REDACTED_FIELDS}
    data["id"] = obj.pk
    status = getattr(obj, "status", None)
    if status is not None:
        data["status"] = status
    result: dict[str, Any] = json.loads(json.dumps(data, cls=DjangoJSONEncoder, default=str))
    return result


def _tenant_of(obj: models.Model) -> Tenant | None:
    if isinstance(obj, Tenant):
        return obj
    tenant = getattr(obj, "tenant", None)
    return tenant if isinstance(tenant, Tenant) else None


def record_event(
    actor: Actor,
    action: AuditAction,
    obj: models.Model,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    object_id: Any = None,
) -> AuditEvent:
    """Write one AuditEvent; call it inside the service's transaction."""
    tenant = _tenant_of(obj)
    user = actor.user if actor.user is not None and actor.user.is_authenticated else None
    return AuditEvent.objects.create(
        actor=user,  # type: ignore[misc]  # AUTH_USER_MODEL is django.contrib.auth's User
        actor_name=actor.name,
        tenant=tenant if tenant is not None and tenant.pk is not None else None,
        tenant_namespace=tenant.namespace if tenant is not None else "",
        action=action,
        object_type=obj._meta.model_name or type(obj).__name__.lower(),
        object_id=str(object_id if object_id is not None else obj.pk),
        object_repr=str(obj)[:200],
        before=before,
        after=after,
        source_ip=actor.source_ip,
    )


def create_audited(actor: Actor, obj: models.Model) -> None:
    """Save a new plain (not provisioned) object and audit it; call inside a transaction."""
    obj.save()
    record_event(actor, AuditAction.CREATE, obj, after=snapshot(obj))


def update_audited(actor: Actor, obj: models.Model, changes: dict[str, Any]) -> None:
    before = snapshot(obj)
    for name, value in changes.items():
        setattr(obj, name, value)
    obj.save()
    record_event(actor, AuditAction.UPDATE, obj, before=before, after=snapshot(obj))


def delete_audited(actor: Actor, obj: models.Model) -> None:
    """Delete and audit; ProtectedError propagates (409 at the API) and rolls the audit back."""
    before = snapshot(obj)
    pk = obj.pk
    record_event(actor, AuditAction.DELETE, obj, before=before, object_id=pk)
    obj.delete()
