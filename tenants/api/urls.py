"""Routes of the REST API, namespace ``tenants-api``."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from tenants.api import views

app_name = "tenants-api"

router = DefaultRouter()

urlpatterns = [
    path("health", views.HealthView.as_view(), name="health"),
    path("", include(router.urls)),
]
