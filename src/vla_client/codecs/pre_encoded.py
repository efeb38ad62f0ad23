"""A value already written for one wire, to be put into a document byte for byte.

Pixel lists are written by numpy (`pixel_text`, `pixel_msgpack`) rather than built as millions
of Python ints for a serialiser to walk. The image forms hand the result around as a
`PreEncoded`; the JSON serialiser splices it in as an ``orjson.Fragment``, the msgpack one as a
``msgspec.Raw``, so the document is what the serialiser would have written for the plain list.
"""

from __future__ import annotations

from typing import Literal


class PreEncoded:
    """`data` is one complete value (a JSON value, or a msgpack object) on `wire`.

    A plain class, not a dataclass: orjson would serialise a dataclass field by field.
    """

    __slots__ = ("data", "wire")

    def __init__(self, data: bytes, wire: Literal["json", "msgpack"]) -> None:
        self.data = data
        self.wire = wire

    def __repr__(self) -> str:
        return f"PreEncoded({len(self.data)} bytes of {self.wire})"
