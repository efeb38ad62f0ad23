"""Clients for the action API: `ActionClient` (blocking) and `AsyncActionClient` (asyncio).

What both share lives once, in rooms named for what they hold: `options` (`ClientOptions`),
`addressing` (the URL, the key, the transport and endpoint), `request_book` (encoding a request,
reading its reply, the deadline, the counters), `families` (which server family a transport
talks to, and its session: `action_api`, `gr00t`, `dialect`) and `fit`; each client adds only
how it waits on its transport.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.client.async_client import AsyncActionClient as AsyncActionClient
    from vla_client.client.checks import mismatched_cameras as mismatched_cameras
    from vla_client.client.options import ClientOptions as ClientOptions
    from vla_client.client.result import ActionResult as ActionResult
    from vla_client.client.result import Timings as Timings
    from vla_client.client.sync_client import ActionClient as ActionClient

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "AsyncActionClient": "vla_client.client.async_client",
    "mismatched_cameras": "vla_client.client.checks",
    "ClientOptions": "vla_client.client.options",
    "ActionResult": "vla_client.client.result",
    "Timings": "vla_client.client.result",
    "ActionClient": "vla_client.client.sync_client",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)
