"""``mqctl login`` and ``mqctl context``: which control plane to talk to, with which token."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli import output
from cli.config import AppEnvVars
from cli.contexts import Context, ContextStore
from cli.errors import CliError, ExitCode
from cli.options import Output
from cli.session import current

__all__ = ("app", "complete_context", "login")

app = typer.Typer(no_args_is_help=True, help="Saved control-plane connections: list, use, show, set, delete.")

DEFAULT_CONTEXT = "default"


def complete_context(incomplete: str) -> list[str]:
    """Shell completion for context names (reads the contexts file, never fails)."""
    try:
        names = ContextStore.load().contexts
    except CliError:
        return []
    return sorted(n for n in names if n.startswith(incomplete))


ContextName = Annotated[str, typer.Argument(help="Context name.", autocompletion=complete_context)]


def _summary(name: str, ctx: Context, store: ContextStore) -> dict[str, Any]:
    """A context as shown to people and scripts: never the token or a secret."""
    return {
        "name": name,
        "current": name == store.current,
        "url": ctx.url,
        "tenant": ctx.tenant or None,
        "endpoint": ctx.endpoint or None,
        "token": "set" if ctx.token else "none",
        "credentials": sorted(ctx.credentials),
    }


def login(
    url: Annotated[
        str,
        typer.Option(
            "--url", envvar=AppEnvVars.API_URL, help="Control plane URL, e.g. http://127.0.0.1:8000."
        ),
    ],
    token: Annotated[
        str,
        typer.Option(
            "--token",
            envvar=AppEnvVars.TOKEN,
            prompt="API token",
            hide_input=True,
            help="API token (asked for when not given). Operators find theirs in demo.json / Django admin.",
        ),
    ],
    name: Annotated[str, typer.Option("--name", help="Name to save the context under.")] = DEFAULT_CONTEXT,
    tenant: Annotated[
        str, typer.Option("--tenant", "-t", help="Default tenant namespace for this context.")
    ] = "",
    endpoint: Annotated[
        str, typer.Option("--endpoint", help="Broker access point HOST:PORT for the message commands.")
    ] = "",
    verify: Annotated[
        bool, typer.Option("--verify/--no-verify", help="Check the token against the control plane first.")
    ] = True,
) -> None:
    """Save a control plane URL and token as a context and make it the current one.

    \b
    Examples:
      mqctl login --url http://127.0.0.1:8000
      mqctl login --url https://mq.example.com --name prod --tenant acme --endpoint mq.example.com:8081
      MQCTL_TOKEN=... mqctl login --url https://mq.example.com
    """
    from cli.api import ApiClient

    session = current()
    visible = 0
    if verify:
        client = ApiClient(url, token, timeout=session.http_timeout)
        try:
            page = client.get("tenants/", limit=1)
        finally:
            client.close()
        visible = page.get("count", 0) if isinstance(page, dict) else 0
    store = session.store()
    previous = store.contexts.get(name)
    store.contexts[name] = Context(
        url=url.rstrip("/"),
        token=token,
        tenant=tenant or (previous.tenant if previous else ""),
        endpoint=endpoint or (previous.endpoint if previous else ""),
        credentials=previous.credentials if previous else {},
    )
    store.current = name
    store.save()
    seen = f"; {visible} tenant(s) visible" if verify else ""
    output.success(f"logged in to {url} as context {name!r}{seen}")


@app.command("list")
def list_contexts(fmt: Output = output.OutputFormat.TABLE) -> None:
    """List saved contexts (the current one is marked)."""
    store = current().store()
    rows = [_summary(name, ctx, store) for name, ctx in sorted(store.contexts.items())]
    output.emit(rows, fmt, ("name", "current", "url", "tenant", "endpoint", "token"))


@app.command("use")
def use(name: ContextName) -> None:
    """Make NAME the current context."""
    store = current().store()
    store.get(name)  # raises not-found with the known names
    store.current = name
    store.save()
    output.success(f"now using context {name!r}")


@app.command("show")
def show(
    name: Annotated[
        str | None, typer.Argument(help="Context name (default: current).", autocompletion=complete_context)
    ] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Show a context (tokens and secrets are never printed)."""
    session = current()
    store = session.store()
    chosen = name or session.context_name or store.current
    ctx = store.get(chosen)
    if ctx is None:
        raise CliError("no current context: run mqctl login", ExitCode.NOT_FOUND)
    output.emit(_summary(chosen, ctx, store), fmt)


@app.command("set")
def set_defaults(
    name: Annotated[
        str | None, typer.Argument(help="Context name (default: current).", autocompletion=complete_context)
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", "-t", help="Default tenant namespace.")] = None,
    endpoint: Annotated[str | None, typer.Option("--endpoint", help="Broker access point HOST:PORT.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="Control plane URL.")] = None,
    access_key: Annotated[
        str | None, typer.Option("--access-key", help="Save an access key for --tenant (with --secret-key).")
    ] = None,
    secret_key: Annotated[str | None, typer.Option("--secret-key", help="The access key's secret.")] = None,
) -> None:
    """Change a context's defaults ("" clears --tenant/--endpoint).

    \b
    Examples:
      mqctl context set --tenant acme
      mqctl context set prod --endpoint mq.example.com:8081
      mqctl context set --tenant acme --access-key AK... --secret-key ...
    """
    from cli.contexts import Credentials

    session = current()
    store = session.store()
    chosen = name or session.context_name or store.current
    ctx = store.get(chosen)
    if ctx is None:
        raise CliError("no current context: run mqctl login", ExitCode.NOT_FOUND)
    if tenant is not None:
        ctx.tenant = tenant
    if endpoint is not None:
        ctx.endpoint = endpoint
    if url is not None:
        ctx.url = url.rstrip("/")
    if (access_key is None) != (secret_key is None):
        raise CliError("--access-key and --secret-key go together", ExitCode.USAGE)
    if access_key is not None and secret_key is not None:
        if not ctx.tenant and not tenant:
            raise CliError("which tenant is the key for? add --tenant", ExitCode.USAGE)
        ctx.credentials[tenant or ctx.tenant] = Credentials(access_key, secret_key)
    store.save()
    output.success(f"context {chosen!r} updated")


@app.command("delete")
def delete(name: ContextName) -> None:
    """Forget a context (its token and saved keys)."""
    store = current().store()
    store.get(name)
    del store.contexts[name]
    if store.current == name:
        store.current = ""
    store.save()
    output.success(f"context {name!r} deleted")
