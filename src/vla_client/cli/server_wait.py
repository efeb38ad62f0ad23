"""Waiting for a server that is starting: ``vla-client serve &`` then ``vla-client send``.

Pasted together, the second command runs while the first is still starting. So a command's
first contact with a server whose port refuses connections waits up to ``--wait-for-server``
seconds (`DEFAULT_WAIT_S` unless given; 0 does not wait) for something to listen there, and
says once on stderr that it waits and for how long. Then the command goes on: a server that is
really down is the client's own one-line error, a few seconds later. Only a refused connection
is waited for; an unknown host, a route that times out, anything else is the client's to say
at once. GR00T's ZeroMQ server (a ``tcp://`` URL) is not waited for here: its client waits for
the connection itself (``--connect-timeout``, `connect_timeout_s`).

``vla-client serve`` listens on its port within its first second (requests queue until it
serves them, and while its policy warms up it answers 503 and the client waits for that), so
the wait covers the server process's own start.
"""

from __future__ import annotations

import socket
import sys
import time
from urllib.parse import urlsplit

DEFAULT_WAIT_S = 5.0
PROBE_TIMEOUT_S = 2.0
POLL_S = 0.1
DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def wait_for_server(url: str | None, wait_s: float) -> None:
    """Return once `url`'s port accepts a TCP connection, or `wait_s` seconds passed, or the
    port fails in a way waiting does not mend (saying on stderr, once, that it waits)."""
    if url is None or wait_s <= 0:
        return
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS:  # tcp://, GR00T's: its client waits (connect_timeout_s)
        return
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    if parts.hostname is None:
        return
    ends_at = time.monotonic() + wait_s
    said = False
    while _refused(parts.hostname, port):
        left = ends_at - time.monotonic()
        if left <= 0:
            return
        if not said:
            print(
                f"vla-client: nothing listens on port {port} of {parts.hostname} yet; waiting "
                f"up to {wait_s:g} s for a server to start there (--wait-for-server SECONDS)",
                file=sys.stderr,
                flush=True,
            )
            said = True
        time.sleep(min(POLL_S, left))


def _refused(host: str, port: int) -> bool:
    """Whether a connection to `host`:`port` is refused (nothing listens there)."""
    try:
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
    except ConnectionRefusedError:
        return True
    except OSError:  # unknown host, unreachable, timed out: the client reports it
        return False
    return False
