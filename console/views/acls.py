"""The ACL policy editor: list, create, edit, delete ACL 2.0 policies of a tenant."""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import Scope, tenant_view
from console.forms import AclPolicyForm
from console.views.resources import TenantResource, resource_views
from tenants.models import AclPolicy
from tenants.services import acls, queries
from tenants.services.authz import Change

__all__ = ("ACLS", "acl_list", "acl_views")


def _form(scope: Scope, data: Any, obj: Model | None) -> AclPolicyForm:
    key_ids = [k.access_key for k in queries.access_keys(scope.tenant) if k.is_usable]
    initial = AclPolicyForm.initial_from(obj) if obj is not None else None
    if obj is not None and obj.principal not in key_ids and obj.principal != "*":  # type: ignore[attr-defined]
        key_ids.append(obj.principal)  # type: ignore[attr-defined]
    return AclPolicyForm(data, initial=initial, key_ids=key_ids)


ACLS = TenantResource(
    url_name="acl",
    label="ACL policy",
    change=Change.ACL_POLICY,
    model=AclPolicy,
    lookup="pk",
    form=_form,
    create=lambda actor, tenant, data: acls.create_acl(actor, tenant, **data),
    update=lambda actor, obj, changes: acls.update_acl(actor, obj, **changes),
    delete=acls.delete_acl,
)
acl_views = resource_views(ACLS)


@tenant_view()
def acl_list(request: HttpRequest, scope: Scope) -> HttpResponse:
    return render(
        request, "console/acls/list.html", {"scope": scope, "policies": queries.acl_policies(scope.tenant)}
    )
