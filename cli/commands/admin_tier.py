"""``mqctl admin tier``: tiered storage of a broker node (mqcloud.admin.v1.TierAdmin)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="Tiered storage: offload progress, bytes local vs tiered.")

SUMMARY_FIELDS = (
    "url",
    "manifest_loaded",
    "is_master",
    "tiered_segments",
    "tiered_bytes",
    "tiered_min_offset",
    "tiered_end_offset",
    "local_segments",
    "local_bytes",
    "local_min_offset",
    "max_offset",
    "confirmed_offset",
    "offload_lag_bytes",
    "offload_lag_seconds",
    "segments_offloaded",
    "segments_expired",
    "offload_failures",
    "last_error",
    "cache_hit_rate",
    "cache_bytes",
    "cache_capacity_bytes",
)
TOPIC_COLUMNS = ("topic", "local_bytes", "tiered_bytes")


@app.command("status")
def status(
    namespace: Annotated[str, typer.Option("--namespace", help="Only topics of this namespace")] = "",
) -> None:
    """Offload progress and lag, bytes local vs tiered (total and per topic), cold-read cache."""
    from cli.commands.admin import _state, fail
    from cli.output import print_json, print_table
    from mqcloud.admin_client import BrokerAdminError, to_dict
    from mqcloud.admin_tier import TierAdminClient

    try:
        with TierAdminClient(_state["broker"], token=_state["token"]) as client:
            data: dict[str, Any] = to_dict(client.status(namespace))
    except BrokerAdminError as exc:
        fail(exc)
    if _state["json"]:
        print_json(data)
        return
    print_table(
        [{"field": f, "value": data.get(f, "")} for f in SUMMARY_FIELDS], ("field", "value"), title="tier"
    )
    print_table(data.get("topics", []), TOPIC_COLUMNS, title="topics")
