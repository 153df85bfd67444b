"""``mqctl cluster``: the broker registry (operators): clusters, broker groups, nodes, HA state."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli import output
from cli.errors import CliError, ExitCode
from cli.options import Output
from cli.resources import confirm, only_given
from cli.session import current

__all__ = ("app", "master_endpoints")

app = typer.Typer(
    no_args_is_help=True, help="Broker clusters, groups and nodes (operators); HA state of each group."
)
group_app = typer.Typer(no_args_is_help=True, help="Broker groups (a master and its replicas).")
node_app = typer.Typer(no_args_is_help=True, help="Broker nodes (one broker process each).")
app.add_typer(group_app, name="group")
app.add_typer(node_app, name="node")

CLUSTERS, GROUPS, NODES = "broker-clusters/", "broker-groups/", "broker-nodes/"
NODE_COLUMNS = ("name", "group", "broker_id", "endpoint", "enabled", "health", "last_seen")

ClusterName = Annotated[str, typer.Argument(help="Cluster name.")]
ClusterOpt = Annotated[str | None, typer.Option("--cluster", "-c", help="Cluster name.")]


def _cluster(name: str) -> dict[str, Any]:
    return current().api().find(CLUSTERS, f"cluster {name!r}", name=name)


def _group(cluster: str | None, name: str) -> dict[str, Any]:
    rows = current().api().list(GROUPS, name=name, cluster=cluster)
    if not rows:
        raise CliError(f"broker group {name!r} not found", ExitCode.NOT_FOUND)
    if len(rows) > 1:
        raise CliError(f"several clusters have a broker group {name!r}: add --cluster", ExitCode.USAGE)
    return rows[0]


def _node(name: str) -> dict[str, Any]:
    return current().api().find(NODES, f"broker node {name!r}", name=name)


def master_endpoints(cluster_id: int | None) -> list[str]:
    """Endpoints of the enabled masters (broker id 0) of a cluster (the default one when None)."""
    api = current().api()
    if cluster_id is None:
        cluster_id = int(api.find(CLUSTERS, "a default broker cluster", is_default="true")["id"])
    groups = {g["id"] for g in api.list(GROUPS, cluster_id=cluster_id)}
    return [
        str(n["endpoint"])
        for n in api.list(NODES, broker_id=0, enabled="true", ordering="name")
        if n.get("group") in groups
    ]


@app.command("list")
def list_clusters(fmt: Output = output.OutputFormat.TABLE) -> None:
    """List broker clusters."""
    output.emit(
        current().api().list(CLUSTERS, ordering="name"), fmt, ("id", "name", "is_default", "description")
    )


@app.command("get")
def get(name: ClusterName, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Show one cluster."""
    output.emit(_cluster(name), fmt)


@app.command("create")
def create(
    name: ClusterName,
    default: Annotated[bool, typer.Option("--default", help="Host tenants that name no cluster.")] = False,
    description: Annotated[str, typer.Option("--description")] = "",
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Register a broker cluster."""
    row = current().api().post(CLUSTERS, {"name": name, "is_default": default, "description": description})
    output.emit(row, fmt)
    output.success(f"cluster {name} created")


@app.command("update")
def update(
    name: ClusterName,
    default: Annotated[bool | None, typer.Option("--default/--no-default", show_default=False)] = None,
    description: Annotated[str | None, typer.Option("--description")] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Change a cluster's description or default flag."""
    api = current().api()
    row = _cluster(name)
    output.emit(
        api.patch(f"{CLUSTERS}{row['id']}/", only_given(is_default=default, description=description)), fmt
    )


@app.command("delete")
def delete(
    name: ClusterName, yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False
) -> None:
    """Remove a cluster from the registry (refused while groups or tenants use it)."""
    row = _cluster(name)
    confirm(f"cluster {name}", yes)
    current().api().request("DELETE", f"{CLUSTERS}{row['id']}/", not_found=f"cluster {name!r}")
    output.success(f"cluster {name} deleted")


@app.command("ha")
def ha(cluster: ClusterOpt = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """HA state per broker group: the master (broker id 0), its replicas, their health and last contact."""
    api = current().api()
    clusters = {c["id"]: c["name"] for c in api.list(CLUSTERS)}
    groups = api.list(GROUPS, cluster=cluster, ordering="name")
    nodes = api.list(NODES, ordering="broker_id")
    rows = []
    for group in groups:
        members = [n for n in nodes if n.get("group") == group["id"]]
        master = next((n for n in members if n.get("broker_id") == 0), None)
        replicas = [n for n in members if n.get("broker_id") != 0]
        healthy = [n for n in members if n.get("health") == "healthy" and n.get("enabled")]
        rows.append(
            {
                "cluster": clusters.get(group.get("cluster"), group.get("cluster")),
                "group": group["name"],
                "master": master["name"] if master else None,
                "master_endpoint": master["endpoint"] if master else None,
                "master_health": master["health"] if master else "none",
                "replicas": [f"{n['name']}({n['health']})" for n in replicas],
                "nodes": len(members),
                "healthy": len(healthy),
                "writable": bool(master and master.get("enabled") and master.get("health") == "healthy"),
            }
        )
    output.emit(
        rows,
        fmt,
        ("cluster", "group", "master", "master_endpoint", "master_health", "replicas", "healthy", "writable"),
    )


@group_app.command("list")
def group_list(cluster: ClusterOpt = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """List broker groups (of one cluster with --cluster)."""
    output.emit(
        current().api().list(GROUPS, cluster=cluster, ordering="name"), fmt, ("id", "name", "cluster")
    )


@group_app.command("create")
def group_create(
    name: Annotated[str, typer.Argument(help="Broker group name.")],
    cluster: Annotated[str, typer.Option("--cluster", "-c", help="Cluster name.")],
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Add a broker group to a cluster."""
    row = current().api().post(GROUPS, {"cluster": _cluster(cluster)["id"], "name": name})
    output.emit(row, fmt)
    output.success(f"broker group {name} created in {cluster}")


@group_app.command("delete")
def group_delete(
    name: Annotated[str, typer.Argument(help="Broker group name.")],
    cluster: ClusterOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Remove a broker group (and its nodes) from the registry."""
    row = _group(cluster, name)
    confirm(f"broker group {name}", yes)
    current().api().request("DELETE", f"{GROUPS}{row['id']}/")
    output.success(f"broker group {name} deleted")


@node_app.command("list")
def node_list(
    group: Annotated[str | None, typer.Option("--group", "-g", help="Broker group name.")] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """List broker nodes with their health."""
    output.emit(current().api().list(NODES, group=group, ordering="name"), fmt, NODE_COLUMNS)


@node_app.command("add")
def node_add(
    name: Annotated[str, typer.Argument(help="Node name, unique platform-wide.")],
    group: Annotated[str, typer.Option("--group", "-g", help="Broker group name.")],
    endpoint: Annotated[str, typer.Option("--endpoint", "-e", help="gRPC HOST:PORT of the broker.")],
    cluster: ClusterOpt = None,
    broker_id: Annotated[int, typer.Option("--broker-id", min=0, help="0 for the master.")] = 0,
    metrics_endpoint: Annotated[str, typer.Option("--metrics-endpoint", help="Prometheus HOST:PORT.")] = "",
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Register a broker node; the control plane reconciles it at once (see its health in node list).

    \b
    Examples:
      mqctl cluster create local --default
      mqctl cluster group create local-a --cluster local
      mqctl cluster node add local-a-0 --group local-a --endpoint 127.0.0.1:8081
    """
    body = {
        "group": _group(cluster, group)["id"],
        "name": name,
        "endpoint": endpoint,
        "broker_id": broker_id,
        "metrics_endpoint": metrics_endpoint,
    }
    row = current().api().post(NODES, body)
    output.emit(row, fmt, NODE_COLUMNS)
    output.success(f"broker node {name} registered")


@node_app.command("update")
def node_update(
    name: Annotated[str, typer.Argument(help="Node name.")],
    endpoint: Annotated[str | None, typer.Option("--endpoint", "-e")] = None,
    enabled: Annotated[bool | None, typer.Option("--enable/--disable", show_default=False)] = None,
    metrics_endpoint: Annotated[str | None, typer.Option("--metrics-endpoint")] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Change a node's endpoint, or take it out of provisioning (--disable)."""
    row = _node(name)
    body = only_given(endpoint=endpoint, enabled=enabled, metrics_endpoint=metrics_endpoint)
    output.emit(current().api().patch(f"{NODES}{row['id']}/", body), fmt, NODE_COLUMNS)


@node_app.command("remove")
def node_remove(
    name: Annotated[str, typer.Argument(help="Node name.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Remove a node from the registry (the broker process keeps running)."""
    row = _node(name)
    confirm(f"broker node {name}", yes)
    current().api().request("DELETE", f"{NODES}{row['id']}/")
    output.success(f"broker node {name} removed")
