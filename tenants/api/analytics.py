"""Read-only API of the analytics results: usage-daily, invoices (with lines), lag-daily, job-runs.

Members see their tenants' rows, operators every row (rows of deleted tenants included); job runs are
platform-wide and for operators only. Rows are written by the loader, never through the API.
"""

from __future__ import annotations

from typing import Any

import django_filters as filters
from django.db.models import QuerySet
from rest_framework import serializers, viewsets

from tenants.api.permissions import IsOperator, is_operator
from tenants.api.viewsets import ControlPlaneViewSet, TenantScopedViewSet
from tenants.models import Invoice, InvoiceLine, JobRun, LagDaily, UsageDaily

__all__ = (
    "InvoiceFilterSet",
    "InvoiceLineSerializer",
    "InvoiceSerializer",
    "InvoiceViewSet",
    "JobRunFilterSet",
    "JobRunSerializer",
    "JobRunViewSet",
    "LagDailyFilterSet",
    "LagDailySerializer",
    "LagDailyViewSet",
    "UsageDailyFilterSet",
    "UsageDailySerializer",
    "UsageDailyViewSet",
)

_READ_ONLY = ("get", "head", "options")


#
# Serializers
#


class UsageDailySerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = UsageDaily
        fields = "__all__"


class InvoiceLineSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = InvoiceLine
        exclude = ("invoice",)


class InvoiceSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    lines = InvoiceLineSerializer(many=True, read_only=True)

    class Meta:
        model = Invoice
        fields = "__all__"


class LagDailySerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = LagDaily
        fields = "__all__"


class JobRunSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = JobRun
        fields = "__all__"


#
# Filters: tenant as tenant_id / tenant (namespace), days as date / since / until
#


class _DailyFilterSet(filters.FilterSet):
    tenant_id = filters.NumberFilter(field_name="tenant_id")
    tenant = filters.CharFilter(field_name="namespace")
    date = filters.DateFilter(field_name="date")
    since = filters.DateFilter(field_name="date", lookup_expr="gte")
    until = filters.DateFilter(field_name="date", lookup_expr="lte")


class UsageDailyFilterSet(_DailyFilterSet):
    class Meta:
        model = UsageDaily
        fields = ()


class LagDailyFilterSet(_DailyFilterSet):
    group = filters.CharFilter(field_name="group_name")
    group_id = filters.NumberFilter(field_name="group_id")

    class Meta:
        model = LagDaily
        fields = ()


class InvoiceFilterSet(filters.FilterSet):
    tenant_id = filters.NumberFilter(field_name="tenant_id")
    tenant = filters.CharFilter(field_name="namespace")
    month = filters.CharFilter(method="filter_month", help_text="YYYY-MM")

    class Meta:
        model = Invoice
        fields = ("final",)

    def filter_month(self, queryset: QuerySet[Invoice], name: str, value: str) -> QuerySet[Invoice]:
        year, _, month = value.partition("-")
        if not (year.isdigit() and month.isdigit()):
            return queryset.none()
        return queryset.filter(period_start__year=int(year), period_start__month=int(month))


class JobRunFilterSet(filters.FilterSet):
    class Meta:
        model = JobRun
        fields = ("job", "date", "status", "trigger")


#
# Viewsets
#


class _ResultViewSet(TenantScopedViewSet, viewsets.ReadOnlyModelViewSet):  # type: ignore[misc,type-arg]
    http_method_names = _READ_ONLY

    def get_queryset(self) -> QuerySet[Any]:
        # rows of deleted tenants (tenant NULL) stay visible to operators only
        qs = super().get_queryset()
        return qs if is_operator(self.request.user) else qs.filter(tenant__isnull=False)


class UsageDailyViewSet(_ResultViewSet):
    """Metered usage per tenant and day."""

    queryset = UsageDaily.objects.all()
    serializer_class = UsageDailySerializer
    filterset_class = UsageDailyFilterSet
    ordering_fields = ("date", "namespace", "bytes_in", "bytes_out", "storage_byte_hours")
    search_fields = ("namespace",)


class InvoiceViewSet(_ResultViewSet):
    """Monthly invoices with their daily lines."""

    queryset = Invoice.objects.prefetch_related("lines")
    serializer_class = InvoiceSerializer
    filterset_class = InvoiceFilterSet
    ordering_fields = ("period_start", "namespace", "total")
    search_fields = ("namespace",)


class LagDailyViewSet(_ResultViewSet):
    """Consumer-group lag per day."""

    queryset = LagDaily.objects.all()
    serializer_class = LagDailySerializer
    filterset_class = LagDailyFilterSet
    ordering_fields = ("date", "namespace", "group_name", "p95_lag_messages", "minutes_above_slo")
    search_fields = ("namespace", "group_name")


class JobRunViewSet(ControlPlaneViewSet, viewsets.ReadOnlyModelViewSet):  # type: ignore[misc,type-arg]
    """Runs of the analytics jobs (operators only)."""

    queryset = JobRun.objects.all()
    serializer_class = JobRunSerializer
    filterset_class = JobRunFilterSet
    permission_classes = (IsOperator,)
    ordering_fields = ("started", "date", "job", "status")
    http_method_names = _READ_ONLY
