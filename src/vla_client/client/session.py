"""What a server family's calls look like to the clients: `Session`, a set of steps.

Each family the clients speak to is one module of steps (see `vla_client.transports.drive`):
`vla_client.client.action_api` (the action API and openpi's websocket),
`vla_client.client.gr00t` (GR00T's ZeroMQ server) and `vla_client.client.dialect`
(vLLM-Omni's and RoboArena's websockets). `ActionClient` drives a session's steps blocking,
`AsyncActionClient` under asyncio; neither knows which family it speaks to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from vla_client.client.result import ActionResult
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata
from vla_client.transports.drive import Steps


class Session(Protocol):
    """One client's calls to one server family, as steps that do no I/O themselves."""

    def metadata(self) -> Steps[ActionMetadata]:
        """The server's description, as the action API's metadata."""
        ...

    def contract(self, deadline_at: float | None) -> Steps[ActionMetadata | None]:
        """The metadata observations are fitted to before `deadline_at` (a `time.monotonic()`
        time, None: no deadline); None with ``check_contract=False``."""
        ...

    def infer(
        self,
        observation: Observation,
        parameters: Mapping[str, Any],
        request_id: str | None,
        runtime: Mapping[str, Any] | None = None,
    ) -> Steps[ActionResult]:
        """One request for `observation` with `parameters` (and the `runtime` block, where the
        family has a place for one; elsewhere a `ValueError`), its reply's actions as an
        `ActionResult`."""
        ...

    def reset(self) -> Steps[None]:
        """Start a new episode at the server (nothing where it keeps none)."""
        ...
