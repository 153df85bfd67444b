"""Who is looking at which tenant: the scope every console page runs in, and the guards.

Tenant pages live under ``/t/<namespace>/``. A tenant the user may not see is 404 (existence does
not leak, as in the API); a change the user's role does not allow is 403. The rules themselves are
``tenants.services.authz``'s; this module only applies them to requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase

from tenants.models import Tenant
from tenants.services import authz
from tenants.services.audit import Actor
from tenants.services.authz import Change

__all__ = ("SESSION_TENANT", "Scope", "actor_of", "is_htmx", "operator_view", "tenant_view")

P = ParamSpec("P")
R = TypeVar("R", bound=HttpResponseBase)
SESSION_TENANT = "console_tenant"


@dataclass(frozen=True, slots=True)
class Scope:
    """The tenant a page shows, the viewer's role in it, and what that role may change."""

    tenant: Tenant
    role: str | None
    operator: bool
    can: dict[str, bool] = field(default_factory=dict)  # Change value -> allowed, for templates

    @property
    def role_label(self) -> str:
        if self.role:
            return self.role
        return "operator" if self.operator else ""

    @property
    def read_only(self) -> bool:
        return not any(self.can.values())

    def require(self, change: Change) -> None:
        """403 unless the viewer may make this kind of change."""
        if not self.can.get(change, False):
            raise PermissionDenied(f"Your role in {self.tenant.namespace} does not allow this change.")


def scope_for(request: HttpRequest, namespace: str) -> Scope:
    tenant = authz.visible_tenant(request.user, namespace)
    if tenant is None:
        raise Http404("No such tenant.")
    role = authz.role_of(request.user, tenant)
    can = {c.value: authz.may_change(request.user, role, c) for c in Change}
    return Scope(tenant, role, authz.is_operator(request.user), can)


def actor_of(request: HttpRequest) -> Actor:
    """The acting user and the address the request came from, for the audit log."""
    return Actor(user=request.user, source_ip=request.META.get("REMOTE_ADDR") or None)


def is_htmx(request: HttpRequest) -> bool:
    """Whether htmx asked for a fragment (it sends ``HX-Request: true``)."""
    return request.headers.get("HX-Request") == "true"


def tenant_view(
    change: Change | None = None,
) -> Callable[[Callable[Concatenate[HttpRequest, Scope, P], HttpResponse]], Callable[..., HttpResponse]]:
    """Resolve ``namespace`` to a Scope (404 if not visible); with ``change``, every method needs it."""

    def decorate(
        view: Callable[Concatenate[HttpRequest, Scope, P], HttpResponse],
    ) -> Callable[..., HttpResponse]:
        @login_required
        @wraps(view)
        def wrapper(request: HttpRequest, namespace: str, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
            scope = scope_for(request, namespace)
            if change is not None:
                scope.require(change)
            request.session[SESSION_TENANT] = scope.tenant.namespace
            return view(request, scope, *args, **kwargs)

        return wrapper

    return decorate


def operator_view(view: Callable[..., R]) -> Callable[..., R]:
    """Platform pages (and files, e.g. run reports): signed-in operators only (403 for everyone else)."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> R:
        if not authz.is_operator(request.user):
            raise PermissionDenied("Only platform operators see this page.")
        return view(request, *args, **kwargs)

    return wrapper
