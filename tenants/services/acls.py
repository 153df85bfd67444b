"""ACL policies: validation of the ACL 2.0 shape, provisioning."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.db import transaction

from tenants.choices import AclAction
from tenants.errors import ControlPlaneError
from tenants.models import AccessKey, AclPolicy, Tenant
from tenants.services.audit import Actor
from tenants.services.provisioning import ResourceKind
from tenants.services.resources import create_resource, delete_resource, lock_tenant, update_resource

__all__ = ("create_acl", "delete_acl", "update_acl", "validate_acl")


def validate_acl(tenant: Tenant, fields: dict[str, Any]) -> dict[str, Any]:
    """Normalise actions and CIDRs; the principal must be '*' or one of the tenant's keys."""
    errors: dict[str, list[str]] = {}
    actions = fields.get("actions")
    if actions is not None:
        valid = set(AclAction.values)
        if not actions or any(a not in valid for a in actions):
            errors["actions"] = [f"Choose one or more of: {', '.join(AclAction.values)}."]
        else:
            fields["actions"] = sorted(set(actions))
    cidrs = fields.get("source_cidrs")
    if cidrs is not None:
        try:
            fields["source_cidrs"] = [str(ipaddress.ip_network(c, strict=False)) for c in cidrs]
        except (ValueError, TypeError):
            errors["source_cidrs"] = ["Give IPv4 or IPv6 networks, e.g. 10.0.0.0/8."]
    principal = fields.get("principal")
    known = principal is None or principal == "*"
    if not known and not AccessKey.objects.filter(tenant=tenant, access_key=principal).exists():
        errors["principal"] = ["Give '*' or an access key id of this tenant."]
    if errors:
        raise ControlPlaneError(next(iter(errors.values()))[0], errors)
    return fields


@transaction.atomic
def create_acl(actor: Actor, tenant: Tenant, **fields: Any) -> AclPolicy:
    tenant = lock_tenant(tenant)
    policy = AclPolicy(tenant=tenant, **validate_acl(tenant, fields))
    return create_resource(actor, policy, ResourceKind.ACL_POLICY)


def update_acl(actor: Actor, policy: AclPolicy, **changes: Any) -> AclPolicy:
    with transaction.atomic():
        lock_tenant(policy.tenant)
        return update_resource(actor, policy, validate_acl(policy.tenant, changes), ResourceKind.ACL_POLICY)


def delete_acl(actor: Actor, policy: AclPolicy) -> AclPolicy:
    return delete_resource(actor, policy, ResourceKind.ACL_POLICY)
