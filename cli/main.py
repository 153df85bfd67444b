"""mqctl: the command line for MQCloud tenants and operators.

Command groups live in ``cli/commands/<group>.py``, each a Typer app attached here. Heavy imports
(httpx, grpc, the SDK, subprocess management) happen inside command bodies so ``mqctl --help`` stays
fast. Errors reach the user as one line on stderr and an exit code (cli/errors.py); ``--debug`` (or
``MQCTL_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from cli import output
from cli.commands import (
    acls,
    admin,
    admin_cluster,
    admin_tier,
    alerts,
    analytics,
    billing,
    broker,
    clusters,
    contexts,
    controller,
    dlq,
    groups,
    keys,
    messages,
    offsets,
    quotas,
    standalone,
    tenants,
    topics,
    usage,
)
from cli.config import AUTO_ENVVAR_PREFIX, AppEnvVars
from cli.errors import CliError, ExitCode, from_exception
from cli.session import DEFAULT_HTTP_TIMEOUT, Session, begin, current

__all__ = ("app", "main")


class MqctlGroup(TyperGroup):
    """The root group: turns every failure below it into one line on stderr and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except KeyboardInterrupt:
            output.error("interrupted")
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except Exception as exc:
            if current().debug:
                raise
            mapped = from_exception(exc)
            if mapped is None:
                mapped = CliError(f"unexpected {type(exc).__name__}: {exc} (--debug shows the traceback)")
            output.error(mapped.message)
            raise typer.Exit(int(mapped.code)) from None
        finally:
            current().close()


app = typer.Typer(
    name="mqctl",
    cls=MqctlGroup,
    help="MQCloud command line: manage tenants, topics and keys, produce and consume, run the stack.",
    no_args_is_help=True,
    # Locals would print API tokens and secrets into terminals and CI logs.
    pretty_exceptions_show_locals=False,
    # Plain help: Typer's rich help imports ~0.4 s of modules (markdown, tracebacks) on every --help.
    rich_markup_mode=None,
    context_settings={"auto_envvar_prefix": AUTO_ENVVAR_PREFIX, "help_option_names": ["-h", "--help"]},
)


@app.callback()
def root(
    context: Annotated[
        str,
        typer.Option(
            "--context",
            envvar=AppEnvVars.CONTEXT,
            help="Saved context to use (default: the current one; see mqctl context list).",
            autocompletion=contexts.complete_context,
            show_default=False,
        ),
    ] = "",
    url: Annotated[
        str,
        typer.Option(
            "--url",
            envvar=AppEnvVars.API_URL,
            help="Control plane URL (overrides the context's).",
            show_default=False,
        ),
    ] = "",
    token: Annotated[
        str,
        typer.Option(
            "--token",
            envvar=AppEnvVars.TOKEN,
            help="API token (overrides the context's).",
            show_default=False,
        ),
    ] = "",
    http_timeout: Annotated[
        float,
        typer.Option(
            "--http-timeout", envvar=AppEnvVars.HTTP_TIMEOUT, min=0.1, help="Seconds per API request."
        ),
    ] = DEFAULT_HTTP_TIMEOUT,
    debug: Annotated[
        bool,
        typer.Option("--debug", envvar=AppEnvVars.DEBUG, help="Show tracebacks instead of one-line errors."),
    ] = False,
) -> None:
    begin(Session(context_name=context, url=url, token=token, debug=debug, http_timeout=http_timeout))


class Shell(StrEnum):
    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"
    POWERSHELL = "powershell"


@app.command("completion")
def completion(shell: Annotated[Shell, typer.Argument(help="Your shell.")]) -> None:
    """Print the shell completion script (bash, zsh, fish, powershell).

    \b
    Examples:
      eval "$(mqctl completion bash)"     # in ~/.bashrc
      eval "$(mqctl completion zsh)"      # in ~/.zshrc
      mqctl --install-completion          # or let mqctl install it for the current shell
    """
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name="mqctl", complete_var="_MQCTL_COMPLETE", shell=shell.value))


app.command("login")(contexts.login)
app.add_typer(contexts.app, name="context")
app.add_typer(tenants.app, name="tenant")
app.add_typer(keys.app, name="key")
app.add_typer(topics.app, name="topic")
app.add_typer(groups.app, name="group")
app.add_typer(acls.app, name="acl")
app.add_typer(quotas.app, name="quota")
app.add_typer(usage.app, name="usage")
app.add_typer(billing.app, name="billing")
app.add_typer(messages.app, name="message")
app.add_typer(offsets.app, name="offset")
app.add_typer(dlq.app, name="dlq")
app.add_typer(clusters.app, name="cluster")
app.add_typer(analytics.app, name="analytics")
app.add_typer(alerts.rules_app, name="alert-rule")
app.add_typer(alerts.events_app, name="alert-event")
app.command("standalone", help="Run the control plane, Celery and a broker on this machine.")(
    standalone.standalone
)
app.add_typer(broker.app, name="broker", help="Run a broker node.")
app.add_typer(controller.app, name="controller", help="Run an HA controller (election, epochs).")
app.add_typer(admin.app, name="admin", help="Administer a broker node directly over gRPC (operators).")
admin.app.add_typer(admin_cluster.app, name="cluster")
admin.app.add_typer(admin_tier.app, name="tier")


def main() -> None:
    app(prog_name="mqctl")


if __name__ == "__main__":
    main()
