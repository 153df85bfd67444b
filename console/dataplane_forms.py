"""Forms of the data-plane pages: message search, test send, offset reset, dead-letter redrive.

They validate input and translate it into the services' query and draft types; the services and the
brokers decide the rest.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django import forms

from tenants.services.gateway_views import MessageDraft, MessageQuery

__all__ = ("MAX_BODY_BYTES", "MessageSearchForm", "RedriveForm", "ResetOffsetForm", "SendMessageForm")

MAX_BODY_BYTES = 4 << 20  # what the API accepts for a test message
MAX_RESULTS = 256
DATETIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]


def _ms(value: datetime) -> int:
    return max(int(value.timestamp() * 1000), 0)


def _datetime_field(label: str, required: bool = False, help_text: str = "") -> forms.DateTimeField:
    return forms.DateTimeField(
        label=label,
        required=required,
        input_formats=DATETIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}, format="%Y-%m-%dT%H:%M:%S"),
        help_text=help_text,
    )


class MessageSearchForm(forms.Form):
    """Exactly one way of finding messages: by id, by key, by store time, or from a queue offset."""

    MODES = (
        ("time", "Store time range"),
        ("id", "Message id"),
        ("key", "Message key"),
        ("offset", "Queue offset"),
    )
    mode = forms.ChoiceField(choices=MODES, initial="time", widget=forms.RadioSelect, label="Find by")
    message_id = forms.CharField(required=False, max_length=128, label="Message id")
    key = forms.CharField(required=False, max_length=128, label="Key")
    begin = _datetime_field("From (UTC)")
    end = _datetime_field("To (UTC)")
    broker = forms.CharField(
        required=False, max_length=64, label="Broker group", help_text="Queue ids are per broker group."
    )
    queue_id = forms.IntegerField(required=False, min_value=0, max_value=1023, label="Queue id")
    offset = forms.IntegerField(required=False, min_value=0, label="From offset")
    limit = forms.IntegerField(min_value=1, max_value=MAX_RESULTS, initial=32, label="At most")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        mode = data.get("mode")
        needed = {"id": ("message_id",), "key": ("key",), "offset": ("queue_id",), "time": ()}.get(
            mode or "", ()
        )
        for name in needed:
            if data.get(name) in (None, ""):
                self.add_error(name, "Give a value to search by.")
        if mode == "key" and " " in (data.get("key") or ""):
            self.add_error("key", "Keys have no spaces.")
        begin, end = data.get("begin"), data.get("end")
        if mode == "time" and begin and end and end < begin:
            self.add_error("end", "This is before the start.")
        return data

    def to_query(self) -> MessageQuery:
        d = self.cleaned_data
        limit = d.get("limit") or 32
        if d["mode"] == "id":
            return MessageQuery(message_id=d["message_id"].strip(), limit=limit)
        if d["mode"] == "key":
            return MessageQuery(key=d["key"].strip(), limit=limit)
        if d["mode"] == "offset":
            return MessageQuery(queue_id=d["queue_id"], offset=d.get("offset") or 0, limit=limit)
        begin, end = d.get("begin"), d.get("end")
        return MessageQuery(
            begin_ms=_ms(begin) if begin else 0,
            end_ms=_ms(end) if end else (1 << 62),
            limit=limit,
        )


def _pairs(text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise forms.ValidationError(f"Line {number}: write name=value.")
        result[name.strip()] = value.strip()
    return result


class SendMessageForm(forms.Form):
    """A test message: a text body plus the optional RocketMQ attributes."""

    body = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}),
        strip=False,
        max_length=MAX_BODY_BYTES,
        help_text="Sent as UTF-8 text.",
    )
    tag = forms.CharField(required=False, max_length=128, help_text="One tag consumers can filter on.")
    keys = forms.CharField(
        required=False, max_length=1024, help_text="Space-separated keys to find the message by."
    )
    properties = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text="One name=value per line."
    )
    message_group = forms.CharField(
        required=False, max_length=128, help_text="FIFO topics: messages of one group stay in order."
    )
    delivery_time = _datetime_field(
        "Deliver at (UTC)", help_text="Delay topics: not delivered before this time."
    )

    def clean_properties(self) -> dict[str, str]:
        props = _pairs(self.cleaned_data.get("properties") or "")
        if len(props) > 128:
            raise forms.ValidationError("At most 128 properties.")
        return props

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("message_group") and data.get("delivery_time"):
            self.add_error("delivery_time", "A message has a message group or a delivery time, not both.")
        if len((data.get("body") or "").encode()) > MAX_BODY_BYTES:
            self.add_error("body", f"At most {MAX_BODY_BYTES} bytes.")
        return data

    def to_draft(self) -> MessageDraft:
        d = self.cleaned_data
        return MessageDraft(
            body=d["body"].encode(),
            tag=d.get("tag") or "",
            keys=tuple((d.get("keys") or "").split()),
            properties=d.get("properties") or {},
            message_group=d.get("message_group") or "",
            delivery_ms=_ms(d["delivery_time"]) if d.get("delivery_time") else 0,
        )


class ResetOffsetForm(forms.Form):
    """Where a group restarts consuming a topic; asks for an explicit confirmation."""

    TARGETS = (
        ("end", "The end (skip everything not consumed yet)"),
        ("beginning", "The beginning (consume everything kept again)"),
        ("time", "A point in time"),
    )
    topic = forms.ChoiceField(help_text="The topic whose offsets move.")
    to = forms.ChoiceField(choices=TARGETS, widget=forms.RadioSelect, initial="end", label="Move to")
    time = _datetime_field(
        "Time (UTC)", help_text="With 'a point in time': the first message stored at or after it."
    )
    confirm = forms.BooleanField(
        label="I understand that consumers of this group skip or re-consume messages at once",
    )

    def __init__(self, *args: Any, topic_names: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["topic"].choices = [(n, n) for n in topic_names]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("to") == "time" and not data.get("time"):
            self.add_error("time", "Give the time to move to.")
        return data

    @property
    def time_ms(self) -> int:
        when = self.cleaned_data.get("time")
        return _ms(when) if self.cleaned_data.get("to") == "time" and when else 0


_MESSAGE_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class MessageIdsField(forms.Field):
    """Any number of message ids, from checkboxes sharing one name."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[str]:
        values = value if isinstance(value, list | tuple) else ([value] if value else [])
        return [str(v).strip() for v in values if str(v).strip()]

    def validate(self, value: Any) -> None:
        super().validate(value)
        if len(value) > 1000:
            raise forms.ValidationError("At most 1000 messages at a time.")
        for v in value:
            if not _MESSAGE_ID.match(v):
                raise forms.ValidationError(f"'{v[:40]}' is not a message id.")


class RedriveForm(forms.Form):
    """Dead letters to send back to their topic: the selected ones, or all of them."""

    message_ids = MessageIdsField(required=False)
    all = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("all") and not data.get("message_ids"):
            raise forms.ValidationError("Select the dead letters to re-drive, or re-drive all of them.")
        return data
