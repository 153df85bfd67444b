"""What every console page's frame needs: the tenants for the switcher, and whether to show platform pages."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from tenants.services import authz

__all__ = ("navigation",)

SWITCHER_LIMIT = 200  # past this many tenants, operators use the platform's tenant list


def navigation(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    match = getattr(request, "resolver_match", None)
    return {
        "nav_tenants": list(authz.visible_tenants(user).values("namespace", "name")[:SWITCHER_LIMIT]),
        "nav_operator": authz.is_operator(user),
        "nav_section": match.url_name if match is not None else "",
    }
