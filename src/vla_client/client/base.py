"""What `ActionClient` and `AsyncActionClient` share: options, transport, session, counters.

The two clients differ only in how they run their session's steps (`drive` or `adrive`, see
`vla_client.transports.drive`), so everything they accept and set up is written once here,
the server family's `Session` chosen by the transport and endpoint included; each names its
transport classes and the reply-stream protocol its websocket transports follow.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, Generic, TypeVar, cast
from urllib.parse import urlsplit

import vla_client.transports as transports
from vla_client.client.addressing import (
    TransportKind,
    chosen_endpoint,
    resolve_api_key,
    route_in_url,
    transport_kind,
)
from vla_client.client.families import Opening, check_family_options, family_of
from vla_client.client.options import ClientOptions, Resize
from vla_client.client.request_book import RequestBook
from vla_client.client.session import Session
from vla_client.protocol import (
    ActionMetadata,
    Encoding,
    Endpoint,
    LayoutFunction,
    OpenpiLayout,
    Wire,
    read_metadata,
)
from vla_client.protocol.ipc import ipc_path
from vla_client.transports.base import FrameTransport
from vla_client.transports.retry import RetryPolicy
from vla_client.validation import check_choice, check_positive

TransportT = TypeVar("TransportT")


URL_SCHEMES = ("http", "https", "ws", "wss", "tcp", "ipc")
TRANSPORT_CLASSES: dict[TransportKind, str] = {
    "http": "HTTPTransport", "websocket": "WebSocketTransport", "zmq": "ZmqTransport",
    "ipc": "IpcTransport",
}  # fmt: skip
"""The blocking transport class of each kind, by its name in `vla_client.transports`, which
imports it on first use (the ``websocket`` and ``gr00t`` extras may not be installed)."""


def check_base_url(base_url: str) -> None:
    """`ValueError` unless `base_url` is an ``http(s)://``, ``ws(s)://`` or ``tcp://`` (GR00T's
    ZeroMQ) URL with a host, or ``ipc://PATH`` (a server's Unix socket on this host)."""
    if not isinstance(base_url, str):
        raise ValueError(f"base_url must be a URL string; got {base_url!r}")
    parts = urlsplit(base_url)
    check_choice("base_url scheme", parts.scheme, URL_SCHEMES)
    if parts.scheme == "ipc":
        ipc_path(base_url)  # a path, or `ValueError` saying what an ipc URL is
        return
    if not parts.netloc:
        raise ValueError(f"base_url needs a host, as in http://127.0.0.1:8000; got {base_url!r}")
    if reason := route_in_url(base_url):
        raise ValueError(reason)


OPTION_KEYWORDS = tuple(f.name for f in fields(ClientOptions))
"""The constructor keywords that `ClientOptions` also holds: each is set in one place."""

InitT = TypeVar("InitT", bound=Callable[..., None])


def options_in_one_place(init: InitT) -> InitT:
    """Refuse a constructor call that gives ``options=`` and any `OPTION_KEYWORDS` as well.

    What counts is whether a keyword was given, not its value: ``options=ClientOptions(
    check_contract=False), check_contract=True`` names the default value, and would otherwise
    be dropped without a word.
    """

    @functools.wraps(init)
    def checked(*args: Any, **kwargs: Any) -> None:
        if kwargs.get("options") is not None:
            given = [name for name in OPTION_KEYWORDS if name in kwargs]
            if given:
                raise ValueError(
                    f"{', '.join(given)} given as keywords beside options=; "
                    "set each in one place (ClientOptions fields or keywords)"
                )
        init(*args, **kwargs)

    return cast("InitT", checked)


def _api_key(api_key: str | None) -> str | None:
    """The key to send: `api_key`, else the environment's (`resolve_api_key`), else None; a
    key given must be a non-empty string."""
    api_key = resolve_api_key(api_key)
    if api_key is not None and (not isinstance(api_key, str) or not api_key.strip()):
        raise ValueError("api_key must be a non-empty string, or None for no key")
    return api_key


def _check_transport_options(
    retry: RetryPolicy | None,
    max_reply_bytes: int | None,
    connect_timeout_s: float | None,
    transport: object,
) -> None:
    """The retry policy, and the reply cap and connection wait, which are for a transport the
    client opens."""
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise TypeError(f"retry must be a RetryPolicy, got {type(retry).__name__}")
    check_positive("max_reply_bytes", max_reply_bytes, integer=True, allow_none=True)
    check_positive("connect_timeout_s", connect_timeout_s, allow_none=True)
    for name, value in (("max_reply_bytes", max_reply_bytes),
                        ("connect_timeout_s", connect_timeout_s)):  # fmt: skip
        if value is not None and not (transport is None or isinstance(transport, str)):
            raise ValueError(f"{name} is for the transport the client opens; set it on "
                             "the transport passed in")  # fmt: skip


class ClientBase(Generic[TransportT]):
    """The constructor both clients share; see `ActionClient` for what each option does."""

    _stream_type: type
    """The runtime-checkable `ReplyStream` protocol of this client's websocket transports."""
    _transport_prefix: str
    """What this client's transport classes' names begin with (``Async`` for asyncio's): in
    `vla_client.transports`, before each name of `TRANSPORT_CLASSES`."""

    @options_in_one_place
    def __init__(
        self,
        base_url: str,
        *,
        options: ClientOptions | None = None,
        encoding: Encoding | None = None,
        wire: Wire | None = None,
        timeout_s: float = 10.0,
        api_key: str | None = None,
        jpeg_quality: int = 90,
        transport: TransportT | TransportKind | None = None,
        endpoint: Endpoint | None = None,
        max_observation_age_s: float | None = None,
        deadline_s: float | None = None,
        retry: RetryPolicy | None = None,
        layout: str | OpenpiLayout | LayoutFunction | None = None,
        camera_map: Mapping[str, str] | None = None,
        resize: Resize = "auto",
        image_size: tuple[int, int] | None = None,
        check_contract: bool = True,
        max_reply_bytes: int | None = None,
        state_split: Mapping[str, int] | None = None,
        connect_timeout_s: float | None = None,
    ) -> None:
        check_positive("timeout_s", timeout_s)
        check_base_url(base_url)
        api_key = _api_key(api_key)
        asked = ClientOptions(
            encoding=encoding,
            wire=wire,
            jpeg_quality=jpeg_quality,
            layout=layout,
            max_observation_age_s=max_observation_age_s,
            deadline_s=deadline_s,
            camera_map=dict(camera_map or {}),
            resize=resize,
            image_size=image_size,
            check_contract=check_contract,
            state_split=state_split,
        )
        if options is not None:
            if not isinstance(options, ClientOptions):
                raise TypeError(f"options must be a ClientOptions, got {type(options).__name__}")
            asked = options
        endpoint = chosen_endpoint(endpoint, asked.layout)
        _check_transport_options(retry, max_reply_bytes, connect_timeout_s, transport)
        self.base_url = base_url
        self.retry = retry or RetryPolicy()
        if transport is None or isinstance(transport, str):
            kind = transport_kind(urlsplit(base_url).scheme, transport, endpoint)
            transport = self._open(
                kind, base_url, timeout_s=timeout_s, api_key=api_key,
                max_reply_bytes=max_reply_bytes, endpoint=endpoint,
                connect_timeout_s=connect_timeout_s,
            )  # fmt: skip
        self._transport: TransportT = transport
        family = family_of(transport)
        check_family_options(asked, family)
        stream = isinstance(transport, self._stream_type)
        self._book = RequestBook(
            asked,
            websocket=stream,
            openpi=getattr(transport, "endpoint", None) == "openpi",
            own_msgpack=family.label if family.own_msgpack else None,
            ipc=isinstance(transport, FrameTransport),
        )
        self._session: Session = family.open(
            self._book, transport, Opening(api_key, self.retry, stream)
        )
        """The server family's calls, as steps each client drives over its transport: GR00T's
        over ZeroMQ, vLLM-Omni's and RoboArena's on their websockets, the action API's (and
        openpi's) over HTTP, a websocket or ``ipc://`` (`vla_client.client.families`)."""
        self.options = self._book.options
        self.stats = self._book.stats

    def _open(
        self,
        kind: TransportKind,
        base_url: str,
        *,
        timeout_s: float,
        api_key: str | None,
        max_reply_bytes: int | None,
        endpoint: Endpoint | None,
        connect_timeout_s: float | None,
    ) -> TransportT:
        """A new transport of `kind` to `base_url`, of this client's own flavour."""
        opener = getattr(transports, self._transport_prefix + TRANSPORT_CLASSES[kind])
        given: dict[str, Any] = {"timeout_s": timeout_s, "max_reply_bytes": max_reply_bytes}
        if kind != "zmq":  # GR00T's key travels in its messages (`Gr00tSession`)
            given["api_key"] = api_key
        if connect_timeout_s is not None:
            if kind != "zmq":
                raise ValueError(
                    "connect_timeout_s is for GR00T's server (a tcp:// URL); other servers "
                    "refuse a connection at once or take timeout_s"
                )
            given["connect_timeout_s"] = connect_timeout_s
        if kind == "websocket":
            given["endpoint"] = endpoint
        return cast("TransportT", opener(base_url, **given))

    def checks(self, metadata: ActionMetadata | Mapping[str, Any]) -> dict[str, Any]:
        """What this client checks and fits before sending to a server announcing `metadata`
        (`metadata()`'s answer, or the document as a dict)."""
        options = self.options
        if not options.check_contract:
            fitter = self._book.fitter(None)
        else:
            read = metadata if isinstance(metadata, ActionMetadata) else read_metadata(metadata)
            fitter = self._book.fitter(read)
        layout = options.layout
        return {
            "contract_checked": options.check_contract,
            **fitter.describe(),
            "openpi_layout": getattr(layout, "name", None if layout is None else "function"),
        }

    @property
    def transport(self) -> TransportT:
        """The transport in use (a websocket transport has its own connection `stats`)."""
        return self._transport
