"""Console forms: they declare and validate input; services decide (and may still refuse)."""

from __future__ import annotations

import ipaddress
from typing import Any

from django import forms

from tenants.choices import (
    AclAction,
    AclDecision,
    AclPatternType,
    AclResourceType,
    MembershipRole,
)
from tenants.constants import QUOTA_LIMIT_FIELDS
from tenants.models import (
    AlertRule,
    BrokerCluster,
    BrokerGroup,
    BrokerNode,
    ConsumerGroup,
    Plan,
    Quota,
    Tenant,
    Topic,
)

__all__ = (
    "AccessKeyForm",
    "AclPolicyForm",
    "AlertRuleForm",
    "BrokerClusterForm",
    "BrokerGroupForm",
    "BrokerNodeForm",
    "ConsumerGroupEditForm",
    "ConsumerGroupForm",
    "MemberAddForm",
    "MemberRoleForm",
    "PlanForm",
    "QuotaForm",
    "RotateForm",
    "TenantCreateForm",
    "TenantEditForm",
    "TenantRenameForm",
    "TopicEditForm",
    "TopicForm",
)


class TopicForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Topic
        fields: tuple[str, ...] = (
            "name",
            "description",
            "message_type",
            "queue_count",
            "retention_hours",
            "tiered_retention_hours",
            "max_message_bytes",
        )
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}
        help_texts = {
            "name": "Letters, digits, '-' and '_'; cannot be changed later.",
            "queue_count": "How many queues the topic is spread over (1-256).",
            "retention_hours": "How long messages stay on the brokers' disks.",
            "tiered_retention_hours": "Then how long in the object store; 0 keeps them hot only.",
        }


class TopicEditForm(TopicForm):
    class Meta(TopicForm.Meta):
        fields = tuple(f for f in TopicForm.Meta.fields if f != "name")


class ConsumerGroupForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = ConsumerGroup
        fields: tuple[str, ...] = (
            "name",
            "description",
            "fifo",
            "broadcast",
            "max_delivery_attempts",
            "retry_policy",
            "retry_initial_backoff_ms",
            "retry_max_backoff_ms",
        )
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}
        help_texts = {
            "name": "Letters, digits, '-' and '_'; cannot be changed later.",
            "max_delivery_attempts": "After this many failed deliveries a message goes to the dead letters.",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        initial, most = data.get("retry_initial_backoff_ms"), data.get("retry_max_backoff_ms")
        if initial is not None and most is not None and most < initial:
            self.add_error("retry_max_backoff_ms", "Must be at least the initial backoff.")
        return data


class ConsumerGroupEditForm(ConsumerGroupForm):
    class Meta(ConsumerGroupForm.Meta):
        fields = tuple(f for f in ConsumerGroupForm.Meta.fields if f != "name")


class AccessKeyForm(forms.Form):
    description = forms.CharField(
        max_length=200, required=False, help_text="What uses this key, e.g. 'orders service, production'."
    )


class RotateForm(forms.Form):
    overlap_hours = forms.IntegerField(
        min_value=0,
        max_value=30 * 24,
        initial=24,
        help_text="How long the old key keeps working, so clients can switch over.",
    )


def _split_lines(value: str) -> list[str]:
    return [part.strip() for part in value.replace(",", "\n").splitlines() if part.strip()]


class AclPolicyForm(forms.Form):
    """An ACL 2.0 policy; the principal is '*' or one of the tenant's access keys."""

    principal = forms.ChoiceField(help_text="Who the policy applies to.")
    resource_type = forms.ChoiceField(choices=AclResourceType.choices, initial=AclResourceType.TOPIC)
    resource_pattern = forms.ChoiceField(choices=AclPatternType.choices, initial=AclPatternType.LITERAL)
    resource_name = forms.CharField(
        max_length=100, required=False, help_text="Empty or '*' for every name; a prefix when Prefixed."
    )
    actions = forms.MultipleChoiceField(choices=AclAction.choices, widget=forms.CheckboxSelectMultiple)
    source_cidrs = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One network per line, e.g. 10.0.0.0/8; empty allows any address.",
    )
    decision = forms.ChoiceField(choices=AclDecision.choices, initial=AclDecision.ALLOW)
    description = forms.CharField(max_length=200, required=False)

    def __init__(self, *args: Any, key_ids: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [("*", "* (every key)")] + [(k, k) for k in key_ids]
        self.fields["principal"].choices = choices  # type: ignore[attr-defined]

    def clean_source_cidrs(self) -> list[str]:
        cidrs = _split_lines(self.cleaned_data.get("source_cidrs") or "")
        for cidr in cidrs:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError as exc:
                raise forms.ValidationError(f"'{cidr}' is not an IPv4 or IPv6 network.") from exc
        return cidrs

    @staticmethod
    def initial_from(policy: Any) -> dict[str, Any]:
        return {
            "principal": policy.principal,
            "resource_type": policy.resource_type,
            "resource_pattern": policy.resource_pattern,
            "resource_name": policy.resource_name,
            "actions": list(policy.actions),
            "source_cidrs": "\n".join(policy.source_cidrs),
            "decision": policy.decision,
            "description": policy.description,
        }


class QuotaForm(forms.ModelForm):  # type: ignore[type-arg]
    """A quota override: limits left empty inherit from the plan."""

    class Meta:
        model = Quota
        fields = ("topic", "group", *QUOTA_LIMIT_FIELDS)
        help_texts = {
            "topic": "Narrow one topic's rates; leave topic and group empty for the whole tenant.",
            "group": "Or narrow one consumer group's rates.",
        }

    def __init__(self, *args: Any, tenant: Tenant, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["topic"].queryset = Topic.objects.filter(tenant=tenant)  # type: ignore[attr-defined]
        self.fields["group"].queryset = ConsumerGroup.objects.filter(tenant=tenant)  # type: ignore[attr-defined]
        if editing:
            self.fields["topic"].disabled = True
            self.fields["group"].disabled = True


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, help_text="The user's sign-in name.")
    role = forms.ChoiceField(choices=MembershipRole.choices, initial=MembershipRole.VIEWER)


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=MembershipRole.choices)


class TenantRenameForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Tenant
        fields = ("name",)


class TenantCreateForm(forms.ModelForm):  # type: ignore[type-arg]
    owner = forms.CharField(
        max_length=150, required=False, help_text="Username of the first owner (optional)."
    )

    class Meta:
        model = Tenant
        fields = ("name", "namespace", "plan", "cluster", "status")
        help_texts = {"namespace": "Qualifies every resource name on the brokers; cannot change later."}


class TenantEditForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Tenant
        fields = ("name", "plan", "cluster", "status")


class PlanForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Plan
        exclude = ("created", "updated")
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}


class BrokerClusterForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = BrokerCluster
        fields = ("name", "description", "is_default")
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}


class BrokerGroupForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = BrokerGroup
        fields = ("cluster", "name")


class BrokerNodeForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = BrokerNode
        fields = ("group", "name", "broker_id", "endpoint", "metrics_endpoint", "enabled")


class AlertRuleForm(forms.ModelForm):  # type: ignore[type-arg]
    """An alert rule of one tenant: the group list holds only that tenant's groups."""

    class Meta:
        model = AlertRule
        fields = (
            "name",
            "group",
            "lag_threshold",
            "dlq_threshold",
            "channel",
            "email",
            "webhook_url",
            "enabled",
        )
        labels = {
            "group": "Consumer group",
            "lag_threshold": "Lag threshold (messages)",
            "dlq_threshold": "Dead-letter threshold",
            "email": "E-mail address",
            "webhook_url": "Webhook URL",
        }
        help_texts = {"name": "How the rule is called in notifications, e.g. 'billing falling behind'."}
        widgets = {
            "webhook_url": forms.URLInput(attrs={"placeholder": "https://hooks.example.com/mq"}),
        }

    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instance.tenant = tenant
        group_field = self.fields["group"]
        assert isinstance(group_field, forms.ModelChoiceField)
        group_field.queryset = ConsumerGroup.objects.filter(tenant=tenant).exclude(status="deleting")
        group_field.empty_label = "— choose a group —"
        self.fields["enabled"].help_text = "A disabled rule is kept but not evaluated."
