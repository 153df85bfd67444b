from django.contrib import admin

from tenants.models import Tenant


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("namespace", "name", "status", "created")
    search_fields = ("namespace", "name")
    list_filter = ("status",)
