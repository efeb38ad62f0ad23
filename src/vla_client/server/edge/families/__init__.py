"""The other server families' protocols, served by the same server: one module and one row each.

``vla-client serve --protocol NAME`` (`vla_client.server.config.ProtocolSettings`) makes the
server speak a family's protocol too, beside the action API and openpi's websocket, for any
policy it serves: `gr00t` (GR00T's ZeroMQ socket, on a port of its own), `vllm_omni`
(vLLM-Omni's robot websocket) and `roboarena` (RoboArena's websocket at ``/``). Each module
reads its family's requests with the documents of `vla_client.protocol.families`, hands the
observation to the server's one pipeline (`answer.run_policy`) and puts the chunk in its
family's reply. `FAMILIES` is the one table of them: a row per family, with `check` (does the
policy's spec fit the family's messages; `ValueError` naming the fix), `install` (its routes on
the app) and `socket` (a socket of its own, served while the app runs), which `create_app`
asks instead of naming a family.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from fastapi import FastAPI

from vla_client.server.config import ProtocolSettings, ServerConfig
from vla_client.server.edge.families import gr00t, roboarena, vllm_omni
from vla_client.server.engine.pipeline import Pipeline
from vla_client.server.policy import PolicySpec


def _no_routes(app: FastAPI, pipeline: Pipeline, settings: ProtocolSettings) -> None:
    """A family served on a socket of its own adds no routes to the app."""


@dataclass(frozen=True)
class ServedFamily:
    """How the server speaks one family's protocol."""

    name: str
    """The family, as people call it."""
    check: Callable[[PolicySpec, ProtocolSettings], None]
    install: Callable[[FastAPI, Pipeline, ProtocolSettings], None] = _no_routes
    path: str | None = None
    """The path of its websocket route on the server's own port."""
    socket: Callable[[Pipeline, ServerConfig], AbstractAsyncContextManager[str]] | None = None


FAMILIES: dict[str, ServedFamily] = {
    "gr00t": ServedFamily("GR00T's policy server", gr00t.check, socket=gr00t.serve_socket),
    "vllm-omni": ServedFamily(
        "vLLM-Omni's robot websocket", vllm_omni.check, vllm_omni.install, vllm_omni.PATH
    ),
    "roboarena": ServedFamily(
        "RoboArena's policy server", roboarena.check, roboarena.install, roboarena.PATH
    ),
}


def check_family(spec: PolicySpec, settings: ProtocolSettings | None) -> None:
    """`ValueError` when the family `settings` names cannot carry `spec`'s policy."""
    if settings is not None:
        FAMILIES[settings.name].check(spec, settings)


def install_family(app: FastAPI, pipeline: Pipeline) -> None:
    """The routes of the family `pipeline`'s config names, on `app` (before the server's own,
    so that RoboArena's ``/`` is the family's)."""
    settings = pipeline.config.protocol
    if settings is not None:
        check_family(pipeline.policy.spec, settings)
        FAMILIES[settings.name].install(app, pipeline, settings)


@contextlib.asynccontextmanager
async def family_socket(pipeline: Pipeline) -> AsyncIterator[str | None]:
    """The socket of the family `pipeline`'s config names, served for the block; yields where
    its clients connect: the socket's URL, or the path of its route on the server's own port
    (None without a family)."""
    settings = pipeline.config.protocol
    if settings is None:
        yield None
        return
    family = FAMILIES[settings.name]
    if family.socket is None:
        yield family.path
        return
    async with family.socket(pipeline, pipeline.config) as url:
        yield url
