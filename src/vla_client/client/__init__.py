"""Clients for the action API: `ActionClient` (blocking) and `AsyncActionClient` (asyncio)."""

from vla_client.client.async_client import AsyncActionClient
from vla_client.client.core import mismatched_cameras
from vla_client.client.result import ActionResult, Timings
from vla_client.client.sync_client import ActionClient

__all__ = ["ActionClient", "ActionResult", "AsyncActionClient", "Timings", "mismatched_cameras"]
