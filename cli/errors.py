"""mqctl's exit codes and the one error type commands raise; mapped to a line on stderr in main.py.

Exit codes are part of the CLI's contract (docs/cli.md): scripts branch on them.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ("CliError", "ExitCode", "exit_code_for_grpc", "exit_code_for_status", "from_exception")


class ExitCode(IntEnum):
    """What a script can rely on; click's own usage errors are 2 as well."""

    OK = 0
    ERROR = 1  # anything else: a server error, an unexpected failure
    USAGE = 2  # bad flags or arguments, or input the server refused as invalid (HTTP 400)
    NOT_FOUND = 3  # the tenant, topic, group, key, message ... does not exist (or is not yours)
    PERMISSION = 4  # signed in, but the role does not allow it (HTTP 403, broker FORBIDDEN)
    UNAUTHENTICATED = 5  # no token, or the token was refused (HTTP 401)
    CONFLICT = 6  # already exists, quota exceeded, still in use, wrong state (HTTP 409)
    UNAVAILABLE = 7  # the control plane or broker cannot be reached (connection refused, HTTP 503)
    TIMEOUT = 8  # waited for a resource to become active (or go away) and it did not
    INTERRUPTED = 130  # Ctrl-C where it is not the normal way to stop


class CliError(Exception):
    """An expected failure: printed as one line (no traceback) and exits with ``code``."""

    def __init__(self, message: str, code: ExitCode = ExitCode.ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def exit_code_for_status(status: int) -> ExitCode:
    """The exit code for an HTTP error status."""
    if status == 400:
        return ExitCode.USAGE
    if status == 401:
        return ExitCode.UNAUTHENTICATED
    if status == 403:
        return ExitCode.PERMISSION
    if status in (404, 410):
        return ExitCode.NOT_FOUND
    if status == 409:
        return ExitCode.CONFLICT
    if status in (502, 503, 504):
        return ExitCode.UNAVAILABLE
    return ExitCode.ERROR


# A broker's gRPC status (by name) -> the exit code of the same meaning (mqctl admin talks gRPC).
_GRPC_EXIT_CODES = {
    "INVALID_ARGUMENT": ExitCode.USAGE,
    "OUT_OF_RANGE": ExitCode.USAGE,
    "NOT_FOUND": ExitCode.NOT_FOUND,
    "PERMISSION_DENIED": ExitCode.PERMISSION,
    "UNAUTHENTICATED": ExitCode.UNAUTHENTICATED,
    "ALREADY_EXISTS": ExitCode.CONFLICT,
    "FAILED_PRECONDITION": ExitCode.CONFLICT,
    "RESOURCE_EXHAUSTED": ExitCode.CONFLICT,
    "ABORTED": ExitCode.CONFLICT,
    "UNAVAILABLE": ExitCode.UNAVAILABLE,
    "DEADLINE_EXCEEDED": ExitCode.UNAVAILABLE,
}


def exit_code_for_grpc(code: str) -> ExitCode:
    """The exit code for a gRPC status code name (``NOT_FOUND``, ...)."""
    return _GRPC_EXIT_CODES.get(code, ExitCode.ERROR)


def from_exception(exc: BaseException) -> CliError | None:
    """A CliError for the library errors a command may let through (HTTP transport, SDK); else None.

    Imports are local: only a failing command pays for them.
    """
    if isinstance(exc, CliError):
        return exc
    module = type(exc).__module__
    if module.startswith("httpx"):
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            return CliError(f"the control plane did not answer in time: {exc}", ExitCode.UNAVAILABLE)
        if isinstance(exc, httpx.TransportError):
            return CliError(f"cannot reach the control plane: {exc}", ExitCode.UNAVAILABLE)
        return CliError(f"HTTP error: {exc}")
    if module.startswith("mqcloud"):
        from mqcloud import errors as sdk

        mapping: tuple[tuple[type[BaseException], ExitCode], ...] = (
            (sdk.NotFoundError, ExitCode.NOT_FOUND),
            (sdk.ForbiddenError, ExitCode.PERMISSION),
            (sdk.UnauthorizedError, ExitCode.UNAUTHENTICATED),
            (sdk.BadRequestError, ExitCode.USAGE),
            (sdk.PayloadTooLargeError, ExitCode.USAGE),
            (sdk.PayloadEmptyError, ExitCode.USAGE),
            (sdk.TransportError, ExitCode.UNAVAILABLE),
            (sdk.RequestTimeoutError, ExitCode.UNAVAILABLE),
            (sdk.ProxyTimeoutError, ExitCode.UNAVAILABLE),
        )
        for kind, code in mapping:
            if isinstance(exc, kind):
                return CliError(f"broker: {exc}", code)
        return CliError(f"broker: {exc}")
    if isinstance(exc, ConnectionError | TimeoutError):
        return CliError(str(exc) or type(exc).__name__, ExitCode.UNAVAILABLE)
    return None
