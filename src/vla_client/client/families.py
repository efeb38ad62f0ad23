"""The server families a client speaks, one row each: how to tell a transport is the family's,
what its requests are, which options are its own, and the session that makes its calls.

A family is one module a side: its documents in `vla_client.protocol.families` (or, for the
action API and openpi's websocket, `vla_client.protocol` itself) and its session of calls in
`vla_client.client`; it is chosen here, and the constructor (`vla_client.client.base`) and the
options (`vla_client.client.options`) ask this table rather than name a family. A new family
adds its two modules, its row in `FAMILIES` and its endpoint name in
`vla_client.protocol.endpoints`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vla_client.client.action_api import ActionApiSession
from vla_client.client.dialect import Dialect, DialectSession
from vla_client.client.gr00t import Gr00tSession
from vla_client.client.options import ClientOptions
from vla_client.client.request_book import RequestBook
from vla_client.client.session import Session
from vla_client.protocol.families import roboarena, vllm_omni
from vla_client.transports.base import MessageTransport
from vla_client.transports.retry import RetryPolicy


@dataclass(frozen=True)
class Opening:
    """What a session is opened with besides its request book and transport."""

    api_key: str | None
    retry: RetryPolicy
    stream: bool
    """Whether the transport is a websocket's reply stream."""


@dataclass(frozen=True)
class Family:
    """One server family: its `endpoint` name, its `label` in messages, whether a `transport`
    is its own (`speaks`), whether its requests are raw arrays in its own msgpack (so the
    encoding, wire and layout options do not apply), the options only it takes, and how its
    session is opened."""

    endpoint: str
    label: str
    speaks: Callable[[object], bool]
    open: Callable[[RequestBook, Any, Opening], Session]
    own_msgpack: bool = True
    own_options: tuple[str, ...] = ()
    dialect: Dialect | None = None
    """The family's documents, for a family that speaks a dialect of openpi's websocket."""


def _dialect(module: Dialect, endpoint: str) -> Family:
    """A family that speaks a dialect of openpi's websocket (`vla_client.client.dialect`)."""
    return Family(
        endpoint=endpoint,
        label=module.NAME,
        speaks=lambda transport: getattr(transport, "endpoint", None) == endpoint,
        open=lambda book, transport, _: DialectSession(book, transport, module),
        dialect=module,
    )


FAMILIES: dict[str, Family] = {
    "gr00t": Family(
        endpoint="gr00t",
        label="GR00T's server",
        speaks=lambda transport: isinstance(transport, MessageTransport),
        open=lambda book, transport, opening: Gr00tSession(book, transport, opening.api_key),
        own_options=("state_split",),
    ),
    "vllm_omni": _dialect(vllm_omni, "vllm_omni"),
    "roboarena": _dialect(roboarena, "roboarena"),
}
"""The families with messages of their own, by endpoint name; in the order they are tried."""
ACTION_API = Family(
    endpoint="realtime",
    label="the action API",
    speaks=lambda transport: True,
    open=lambda book, transport, opening: ActionApiSession(
        book, transport, opening.retry, stream=opening.stream
    ),
    own_msgpack=False,
)
"""SGLang's action API, over HTTP or its websocket, and openpi's websocket: every other
transport."""
DIALECTS = tuple(name for name, family in FAMILIES.items() if family.dialect is not None)
"""The endpoints whose family speaks a websocket dialect of its own."""


def family_of(transport: object) -> Family:
    """The family whose server `transport` talks to."""
    return next((f for f in FAMILIES.values() if f.speaks(transport)), ACTION_API)


def family_labelled(label: str | None) -> Family:
    """The family called `label` in messages (`Family.label`), else the action API's."""
    return next((f for f in FAMILIES.values() if f.label == label), ACTION_API)


def check_family_options(options: ClientOptions, family: Family) -> None:
    """`ValueError` for an option given that belongs to another family (``state_split`` is
    GR00T's), naming the family and its endpoint."""
    for owner in FAMILIES.values():
        for name in owner.own_options:
            if getattr(options, name) is not None and owner is not family:
                raise ValueError(
                    f"{name} is for {owner.label}; pass endpoint={owner.endpoint!r} as well"
                )
