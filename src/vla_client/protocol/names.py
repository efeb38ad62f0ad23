"""The names of the choices the client and the protocol offer, importable without numpy.

The image encodings, the wire formats, the openpi layouts and the ways frames are fitted to a
server's image size: a command line lists them in its ``--help`` and checks a value against
them without loading the code behind them (`image_forms`, `wire`, `layouts` and the client
take them from here).
"""

from __future__ import annotations

from typing import Literal

Encoding = Literal["png", "jpeg", "raw", "pixels"]
ENCODINGS: tuple[Encoding, ...] = ("png", "jpeg", "raw", "pixels")

Wire = Literal["json", "msgpack"]
WIRES: tuple[Wire, ...] = ("json", "msgpack")

LAYOUT_NAMES = ("flat", "droid", "libero", "aloha")
"""The openpi layouts' names, as `vla_client.protocol.LAYOUTS` has them."""

Resize = Literal["auto", "pad", "crop", "none"]
RESIZES: tuple[Resize, ...] = ("auto", "pad", "crop", "none")
"""How frames meet the server's image size: ``auto`` pads (as ``pad``) only when the server
refuses other sizes and leaves them otherwise; ``pad``, ``crop`` and ``none`` as
`FramePreprocessor` does them, whatever the server says."""

RECORDING_SUFFIX = ".vlaobs"
"""The file suffix of a recording of observations (`vla_client.recording`'s ``SUFFIX``)."""
