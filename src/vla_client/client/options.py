"""The client's options in one value (`ClientOptions`): how frames are fitted and encoded, how
long a request may take, and for openpi's endpoint its layout; each checked when given, and
resolved for a transport (`ClientOptions.for_transport`) when a client is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from vla_client.client.fit import MIN_SIDE, check_camera_map
from vla_client.protocol import (
    ENCODINGS,
    FLAT,
    WIRES,
    Encoding,
    LayoutFunction,
    OpenpiLayout,
    Wire,
    openpi_layout,
)
from vla_client.protocol.families.gr00t import check_state_split
from vla_client.protocol.names import RESIZES as RESIZES
from vla_client.protocol.names import Resize as Resize
from vla_client.validation import check_choice, check_positive


@dataclass(frozen=True)
class ClientOptions:
    """How a client fits and encodes an observation, and when it gives up.

    Pass one as ``ActionClient(url, options=ClientOptions(...))`` (to keep a robot's settings
    in one value), or give the same names as keywords, not both: a keyword given beside
    ``options=`` is a `ValueError`, even one that repeats its default (``check_contract=True``
    would otherwise be dropped without a word). `ActionClient.options` is what the client then
    uses, resolved for its transport (`for_transport`).

    Fitting (see `FramePreprocessor`): `camera_map` renames the robot's cameras to the
    server's, frames are resized to the server's image size with `resize` (or to `image_size`
    when given), and with `check_contract` the observation is checked against the server's
    metadata before anything is encoded. Encoding: image `encoding` (None: ``raw`` on openpi's
    endpoint, else ``png``), `wire` (None: ``msgpack`` on a websocket, else ``json``),
    `jpeg_quality`, and for openpi's endpoint the request `layout` (a name such as ``droid``,
    an `OpenpiLayout` or a function; None there: ``flat``). Giving up: observations older
    than `max_observation_age_s` are not sent, and no reply is waited for past `deadline_s`.
    For GR00T's server, `state_split` (state key -> length) cuts the flat state vector into the
    named parts it reads (`vla_client.protocol.families.gr00t`).
    """

    encoding: Encoding | None = None
    wire: Wire | None = None
    jpeg_quality: int = 90
    layout: str | OpenpiLayout | LayoutFunction | None = None
    max_observation_age_s: float | None = None
    deadline_s: float | None = None
    camera_map: Mapping[str, str] = field(default_factory=dict)
    resize: Resize = "auto"
    image_size: tuple[int, int] | None = None
    check_contract: bool = True
    state_split: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        self._check_fit()
        self._check_encoding()
        self._check_layout()
        for name in ("max_observation_age_s", "deadline_s"):
            check_positive(name, getattr(self, name), allow_none=True)

    def _check_fit(self) -> None:
        """The options that fit a frame to the server: the state split, the resize, the camera
        map, the image size and the contract check."""
        check_state_split(self.state_split)
        check_choice("resize", self.resize, RESIZES)
        check_camera_map(self.camera_map)
        if self.image_size is not None and (
            len(self.image_size) != 2 or not all(isinstance(n, int) for n in self.image_size)
        ):
            raise ValueError(f"image_size must be (height, width), got {self.image_size!r}")
        if self.image_size is not None and min(self.image_size) < MIN_SIDE:
            raise ValueError(f"image_size {self.image_size} is under {MIN_SIDE} pixels a side")
        if not isinstance(self.check_contract, bool):
            raise ValueError(f"check_contract must be True or False, got {self.check_contract!r}")

    def _check_encoding(self) -> None:
        """The image encoding, the body's wire and the JPEG quality."""
        if self.encoding is not None:
            check_choice("encoding", self.encoding, ENCODINGS)
        if self.wire is not None:
            check_choice("wire", self.wire, WIRES)
        if isinstance(self.jpeg_quality, bool) or not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality must be in 1..100, got {self.jpeg_quality!r}")

    def _check_layout(self) -> None:
        """openpi's layout: a name, an `OpenpiLayout` or a function, on msgpack, and raw arrays
        for a layout other than the flat one."""
        layout = self.layout
        if isinstance(layout, str):
            openpi_layout(layout)  # a name it knows, or `ValueError` naming them
        elif not (layout is None or isinstance(layout, OpenpiLayout) or callable(layout)):
            raise TypeError(
                f"layout must be a layout name, an OpenpiLayout or a function, got {layout!r}"
            )
        if layout is not None:
            self._check_openpi_body(openpi_layout(layout) if isinstance(layout, str) else layout)

    def _check_openpi_body(self, layout: OpenpiLayout | LayoutFunction) -> None:
        """openpi's requests are msgpack, and raw arrays for a layout other than the flat one."""
        if self.wire not in (None, "msgpack"):
            raise ValueError("openpi requests travel as msgpack only")
        raw_only = isinstance(layout, OpenpiLayout) and layout is not FLAT
        if raw_only and self.encoding not in (None, "raw"):
            raise ValueError(
                f"openpi layout {getattr(layout, 'name', '')!r} sends raw arrays, as openpi's "
                f"policies read them; encoding must be 'raw', got {self.encoding!r}"
            )

    def for_transport(
        self,
        *,
        websocket: bool,
        openpi: bool,
        gr00t: bool = False,
        dialect: str | None = None,
        ipc: bool = False,
    ) -> ClientOptions:
        """These options with the transport's defaults filled in: websockets carry msgpack,
        openpi's endpoint raw arrays in the flat layout (a layout name becomes its
        `OpenpiLayout`), GR00T's server and the servers with a `dialect` of their own (named)
        raw arrays in their msgpack, ``ipc://`` raw frames in shared memory beside msgpack, and
        nothing else. Raises `ValueError` for what the transport cannot carry (`fill_in`, after
        the options only one family takes)."""
        from vla_client.client.families import FAMILIES, check_family_options, family_labelled

        family = FAMILIES["gr00t"] if gr00t else family_labelled(dialect)
        check_family_options(self, family)
        own_msgpack = family.label if family.own_msgpack else (dialect or None)
        return fill_in(self, websocket=websocket, openpi=openpi, own_msgpack=own_msgpack, ipc=ipc)


def fill_in(
    options: ClientOptions,
    *,
    websocket: bool,
    openpi: bool,
    own_msgpack: str | None = None,
    ipc: bool = False,
) -> ClientOptions:
    """`options` with the transport's defaults filled in: websockets carry msgpack, openpi's
    endpoint raw arrays in the flat layout (a layout name becomes its `OpenpiLayout`), a server
    family whose requests are raw arrays in its own msgpack (`own_msgpack`, its name, from
    `vla_client.client.families`) those, ``ipc://`` (`ipc`) raw frames in shared memory beside
    msgpack, and nothing else. Raises `ValueError` for what the transport cannot carry."""
    if own_msgpack is not None:
        return _in_own_msgpack(options, own_msgpack)
    if ipc:
        return _in_shared_memory(options)
    _check_carried(options, websocket=websocket, openpi=openpi)
    return replace(
        options,
        encoding=options.encoding or ("raw" if openpi else "png"),
        wire=options.wire or ("msgpack" if websocket else "json"),
        layout=_openpi_layout(options.layout) if openpi else options.layout,
    )


def _check_carried(options: ClientOptions, *, websocket: bool, openpi: bool) -> None:
    """`ValueError` unless the transport carries the wire and the layout asked for: a
    websocket msgpack only, and a layout is openpi's endpoint's."""
    if websocket and options.wire == "json":
        raise ValueError("websocket frames are msgpack; leave wire unset or pass wire='msgpack'")
    if options.layout is not None and not openpi:
        raise ValueError("layout is for openpi's endpoint; pass endpoint='openpi' as well")


def _openpi_layout(
    layout: str | OpenpiLayout | LayoutFunction | None,
) -> OpenpiLayout | LayoutFunction:
    """openpi's request layout: the one named (the flat one when none is), or the one given."""
    if layout is None or isinstance(layout, str):
        return openpi_layout(layout or "flat")
    return layout


def _in_shared_memory(options: ClientOptions) -> ClientOptions:
    """`options` for ``ipc://``: the action API, its frames raw in shared memory and the rest
    msgpack, so no layout, and no encoding or wire but those."""
    if options.layout is not None:
        raise ValueError("ipc:// speaks the action API; layout is for openpi's endpoint")
    if options.encoding not in (None, "raw") or options.wire not in (None, "msgpack"):
        raise ValueError(
            "ipc:// carries raw frames in shared memory and the rest as msgpack; leave "
            f"encoding and wire unset (got encoding={options.encoding!r}, wire={options.wire!r})"
        )
    return replace(options, encoding="raw", wire="msgpack")


def _in_own_msgpack(options: ClientOptions, family: str) -> ClientOptions:
    """`options` for a server `family` whose requests are raw arrays in its own msgpack: none
    of the encoding, the wire or the layout may be given."""
    given = [name for name in ("encoding", "wire", "layout") if getattr(options, name)]
    if given:
        raise ValueError(f"{family} takes raw arrays in its own msgpack; leave {given} unset")
    return replace(options, encoding="raw", wire="msgpack")
