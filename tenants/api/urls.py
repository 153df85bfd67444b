"""Routes of the REST API, namespace ``tenants-api``."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from tenants.api import alerts, analytics, views

app_name = "tenants-api"

router = DefaultRouter()
router.register("tenants", views.TenantViewSet)
router.register("memberships", views.MembershipViewSet)
router.register("plans", views.PlanViewSet)
router.register("access-keys", views.AccessKeyViewSet)
router.register("topics", views.TopicViewSet)
router.register("consumer-groups", views.ConsumerGroupViewSet)
router.register("acl-policies", views.AclPolicyViewSet)
router.register("quotas", views.QuotaViewSet)
router.register("broker-clusters", views.BrokerClusterViewSet)
router.register("broker-groups", views.BrokerGroupViewSet)
router.register("broker-nodes", views.BrokerNodeViewSet)
router.register("audit-events", views.AuditEventViewSet)
router.register("usage-daily", analytics.UsageDailyViewSet)
router.register("invoices", analytics.InvoiceViewSet)
router.register("lag-daily", analytics.LagDailyViewSet)
router.register("job-runs", analytics.JobRunViewSet)
router.register("alert-rules", alerts.AlertRuleViewSet)
router.register("alert-events", alerts.AlertEventViewSet)

urlpatterns = [
    path("health", views.HealthView.as_view(), name="health"),
    path("", include(router.urls)),
]
