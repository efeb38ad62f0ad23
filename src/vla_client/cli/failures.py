"""How a failed command says what went wrong: one line, in the terms of the command line.

The library's errors are written for Python callers. Here they are said again for someone at a
shell: a `ContractError`'s fix names the flag to type (``--camera-map front=base_0_rgb``, not
``camera_map={'front': 'base_0_rgb'}``); a server's multi-line detail (a remote Python traceback)
shrinks to its last line unless ``-v`` asks for all of it; and a URL that answers with a web page
rather than the action API is called what it is, not a VLA server.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from vla_client.errors import ContractError, ProtocolError, ServerError
from vla_client.protocol import METADATA_PATH

PROBE_TIMEOUT_S = 3.0
TRACEBACK_START = "Traceback (most recent call last):"


def failure_line(exc: Exception, args: argparse.Namespace) -> str:
    """What to print after ``vla-client: error:`` for `exc`, raised by the command `args` ran."""
    verbose = bool(getattr(args, "verbose", False))
    if isinstance(exc, ContractError):
        return exc.describe(flag)
    if isinstance(exc, ServerError | ProtocolError):
        stranger = not_a_vla_server(getattr(args, "url", None))
        if stranger:
            return stranger
        if isinstance(exc, ServerError):
            return server_error_line(exc, verbose=verbose)
    if isinstance(exc, OSError):
        return os_error_message(exc)
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def os_error_message(exc: OSError) -> str:
    """``No such file or directory: out/x.npz`` rather than the errno-prefixed repr."""
    reason = exc.strerror or str(exc)
    return f"{reason}: {exc.filename}" if exc.filename else reason


def flag(option: str, value: object) -> str:
    """An `ActionClient` option as the command line spells it: ``--resize pad``; a camera map
    as one ``--camera-map LOCAL=SERVER`` per camera."""
    name = "--" + option.replace("_", "-")
    if isinstance(value, Mapping):
        return " ".join(f"{name} {local}={server}" for local, server in value.items())
    return f"{name} {value}"


def server_error_line(exc: ServerError, *, verbose: bool) -> str:
    """``server answered 500: ValueError: boom``: a remote traceback is told by its last line
    (the exception), and ``-v`` prints the whole detail instead."""
    detail = exc.detail.strip()
    lines = [line for line in detail.splitlines() if line.strip()]
    if verbose or len(lines) <= 1:
        return str(exc)
    summary = lines[-1] if lines[0].startswith(TRACEBACK_START) else lines[0]
    return f"server answered {exc.status_code}: {summary.strip()} (-v shows the server's detail)"


def not_a_vla_server(url: str | None) -> str | None:
    """Why `url` is not a VLA server, when its metadata path answers in a content type the
    action API never uses (a web server's HTML page, say); None when it may well be one, or
    cannot be asked (a websocket URL, no answer)."""
    if not url or not url.startswith(("http://", "https://")):
        return None
    import httpx

    try:
        response = httpx.get(url.rstrip("/") + METADATA_PATH, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return None
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if "json" in content_type or "msgpack" in content_type:  # the action API's, errors too
        return None
    answered = content_type or "no content type"
    return f"{url} is not a VLA server (GET {METADATA_PATH} answered {answered})"
