"""``mqctl controller``: run an HA controller (docs/ha.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True)


@app.command("start")
def start(
    listen: Annotated[
        str | None, typer.Option("--listen", help="gRPC HOST:PORT [MQ_CONTROLLER_LISTEN]")
    ] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="sqlite:///PATH or postgresql://... [MQ_CONTROLLER_DB]"),
    ] = None,
    controller_id: Annotated[
        str | None,
        typer.Option("--id", help="id in the lease row (default: listen) [MQ_CONTROLLER_CONTROLLER_ID]"),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "INFO",
) -> None:
    """Start a controller; several may share one database, exactly one is active (a lease row)."""
    import asyncio
    import signal

    from pydantic import ValidationError

    from cli.output import abort, info
    from dataplane.ha.controller import ControllerServer, ControllerSettings
    from dataplane.heap import freeze_startup_heap, watch_gc_pauses
    from dataplane.server import configure_logging

    overrides: dict[str, Any] = {"listen": listen, "db": db, "controller_id": controller_id}
    try:
        settings = ControllerSettings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        abort(f"invalid controller settings: {exc}", code=2)
    configure_logging(log_level)

    async def main() -> None:
        server = ControllerServer(settings)
        await server.start()
        watch_gc_pauses()
        freeze_startup_heap()  # as a broker's (dataplane/heap.py): no long full collections
        host = settings.listen.rpartition(":")[0]
        info(f"controller listening on {host}:{server.port}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await server.stop()
        info("controller stopped")

    try:
        asyncio.run(main())
    except OSError as exc:
        abort(f"controller failed to start: {exc}")
