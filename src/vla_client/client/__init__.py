"""Clients for the action API: `ActionClient` (blocking) and `AsyncActionClient` (asyncio).

`core` holds what both share (options, encoding a request, reading its reply, counters); each
client adds only how it waits on its transport.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.client.async_client import AsyncActionClient as AsyncActionClient
    from vla_client.client.checks import mismatched_cameras as mismatched_cameras
    from vla_client.client.result import ActionResult as ActionResult
    from vla_client.client.result import Timings as Timings
    from vla_client.client.sync_client import ActionClient as ActionClient

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
