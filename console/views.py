"""Console pages."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tenants.models import Tenant

__all__ = ("dashboard",)


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """The landing page: the platform at a glance."""
    tenants = Tenant.objects.all()[:50]
    return render(
        request, "console/dashboard.html", {"tenants": tenants, "tenant_count": Tenant.objects.count()}
    )
