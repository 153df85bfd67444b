"""``mqctl admin cluster``: HA status of a broker group (roles, epochs, SyncStateSet, lag)."""

from __future__ import annotations

import typer

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="HA cluster: roles, epochs, SyncStateSet, replication lag.")

NODE_COLUMNS = ("group", "node", "address", "role", "epoch", "max_offset", "master", "sync_state_set")
REPLICA_COLUMNS = ("node", "confirmed_offset", "lag_bytes", "in_sync", "lag_p99_ms")


@app.command("status")
def status() -> None:
    """The group as the broker (``--broker``) and its controller see it."""
    from cli.commands.admin import _state, fail
    from cli.output import print_json, print_table
    from mqcloud.admin_client import BrokerAdminError
    from mqcloud.admin_cluster import ClusterAdminClient

    try:
        with ClusterAdminClient(_state["broker"], token=_state["token"]) as client:
            data = client.status()
    except BrokerAdminError as exc:
        fail(exc)
    if _state["json"]:
        print_json(data)
        return
    node = data["node"]
    rows = data.get("group_nodes") or [node]
    for row in rows:
        row["sync_state_set"] = ",".join(row.get("sync_state_set", []))
    print_table(rows, NODE_COLUMNS, title=f"group {node['group']} (asked {node['node']}, {node['role']})")
    if node.get("replicas"):
        print_table(node["replicas"], REPLICA_COLUMNS, title=f"replicas of master {node['node']}")
