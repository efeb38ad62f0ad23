"""What ``vla-client serve --protocol`` asks of the families' wing before and after it starts.

`check_protocol` is every check that can fail before anything starts (the policy's spec
against the family's messages, GR00T's port free now, GR00T's one socket and several
entrypoints), as a `ValueError` of one line naming the flag and the fix; `protocol_line` is
the line that says where the family's clients connect once the server is ready. The families
themselves are `vla_client.server.edge.families`.
"""

from __future__ import annotations

import socket

from vla_client.server.config import ProtocolSettings
from vla_client.server.edge.families import FAMILIES, check_family
from vla_client.server.edge.families.gr00t import zmq_host
from vla_client.server.local import bind_listener
from vla_client.server.policy import Policy


def check_protocol(
    settings: ProtocolSettings | None, policy: Policy, host: str, api_servers: int
) -> None:
    """`ValueError` naming the fix when the family cannot carry `policy`, or cannot be served
    as asked: GR00T's socket is one process's, and its port must be free now."""
    if settings is None:
        return
    flag = f"--protocol {settings.name}"
    try:
        check_family(policy.spec, settings)
    except ValueError as exc:
        reason = str(exc)
        raise ValueError(reason if reason.startswith(flag) else f"{flag}: {reason}") from None
    if settings.name != "gr00t":
        return
    if api_servers > 1:
        raise ValueError(f"{flag} serves one ZeroMQ socket; drop --api-servers")
    try:
        bind_listener(zmq_host(host).strip("[]"), settings.bound_port).close()
    except socket.gaierror as exc:
        raise ValueError(f"--host {host}: no such interface or name ({exc.strerror})") from None
    except OSError as exc:
        raise ValueError(
            f"--protocol-port {settings.bound_port}: cannot listen there for GR00T's socket "
            f"({exc.strerror or exc}); give a free one"
        ) from None


def protocol_line(settings: ProtocolSettings, where: str, base: str) -> str:
    """The family's name and the URL its clients use, from `where` (the app's
    ``state.protocol_url``: a socket's URL, or a route's path) and the server's `base` URL."""
    url = f"ws{base.removeprefix('http')}{where}" if where.startswith("/") else where
    return f"{FAMILIES[settings.name].name} on {url}"
