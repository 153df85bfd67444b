"""``mqctl broker``: run a broker node."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True)


@app.command("start")
def start(
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Data directory [MQ_BROKER_DATA_DIR]")
    ] = None,
    listen: Annotated[str | None, typer.Option("--listen", help="gRPC HOST:PORT [MQ_BROKER_LISTEN]")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML or JSON settings file")] = None,
    flush: Annotated[str | None, typer.Option("--flush", help="sync | async [MQ_BROKER_FLUSH]")] = None,
    cpu_affinity: Annotated[
        str | None,
        typer.Option("--cpu-affinity", help="CPUs to run on, e.g. 0 or 0-1,4 [MQ_BROKER_CPU_AFFINITY]"),
    ] = None,
    loop_cpu: Annotated[
        str | None,
        typer.Option(
            "--loop-cpu",
            help="CPU of the event loop and gRPC's polling thread: auto, a CPU number, or empty (off) "
            "[MQ_BROKER_LOOP_CPU]",
        ),
    ] = None,
    metrics_listen: Annotated[
        str | None,
        typer.Option("--metrics-listen", help="Prometheus HOST:PORT, 0 disables [MQ_BROKER_METRICS_LISTEN]"),
    ] = None,
    dev: Annotated[
        bool,
        typer.Option(
            "--dev",
            help="Development mode: unsigned requests and (without a token) the admin API are "
            "admitted [MQ_BROKER_DEV_MODE]",
        ),
    ] = False,
    log_level: Annotated[str, typer.Option("--log-level")] = "INFO",
) -> None:
    """Start a broker node; SIGTERM/SIGINT stop it gracefully (exit 0)."""
    from pydantic import ValidationError

    from cli.output import abort, info
    from dataplane.config import load_settings
    from dataplane.cpu_affinity import apply_cpu_affinity
    from dataplane.event_loop import run_on
    from dataplane.grpc_core import apply_experiments
    from dataplane.loop_cpu import choose_cpu

    if metrics_listen is not None and metrics_listen.isdigit() and metrics_listen != "0":
        metrics_listen = f"127.0.0.1:{metrics_listen}"
    try:
        settings = load_settings(
            config,
            data_dir=data_dir,
            listen=listen,
            flush=flush,
            metrics_listen=metrics_listen,
            cpu_affinity=cpu_affinity,
            loop_cpu=loop_cpu,
            dev_mode=True if dev else None,
        )
    except (ValidationError, OSError, ValueError) as exc:
        abort(f"invalid broker settings: {exc}", code=2)
    # before the first import of grpc (dataplane.server's): the core reads them only then
    apply_experiments(settings.grpc_experiments)
    try:  # before the server starts its threads, which inherit it
        apply_cpu_affinity(settings.cpu_affinity)
        choose_cpu(settings.loop_cpu)  # a loop_cpu the process may not run on: refused now
    except (ValueError, OSError) as exc:
        abort(f"invalid broker settings: {exc}", code=2)
    from dataplane.server import configure_logging, run

    configure_logging(log_level)

    try:
        run_on(settings.event_loop, run(settings, announce=info))
    except OSError as exc:
        abort(f"broker failed to start: {exc}")
