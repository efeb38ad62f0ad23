"""The attachment rmw_zenoh puts beside every sample's payload.

Written with Zenoh's serializer by rmw_zenoh: the publisher's sequence number (a 64-bit integer,
little-endian, counting from 1), the source timestamp (nanoseconds since the Unix epoch, 64-bit
little-endian) and the publisher's GID (its length as one byte, 16 for rmw_zenoh, then the
bytes). A subscriber reads the source time from it, as ``rmw_message_info_t`` does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_HEAD = struct.Struct("<QQB")


@dataclass(frozen=True)
class Attachment:
    """A sample's sequence number, source time (ns since the epoch) and publisher GID."""

    sequence: int
    source_time_ns: int
    gid: bytes

    def encode(self) -> bytes:
        if len(self.gid) > 127:  # one LEB128 byte holds lengths up to 127
            raise ValueError(f"a GID of {len(self.gid)} bytes: rmw_zenoh's are 16")
        return _HEAD.pack(self.sequence, self.source_time_ns, len(self.gid)) + self.gid

    @classmethod
    def decode(cls, data: bytes) -> Attachment:
        """The attachment in `data`; ValueError naming what is wrong when it is not one."""
        if len(data) < _HEAD.size:
            raise ValueError(f"an attachment of {len(data)} bytes (at least {_HEAD.size})")
        sequence, source_time_ns, length = _HEAD.unpack_from(data)
        if len(data) != _HEAD.size + length:
            raise ValueError(
                f"an attachment of {len(data)} bytes whose GID says {length} "
                f"(expected {_HEAD.size + length})"
            )
        return cls(sequence, source_time_ns, bytes(data[_HEAD.size :]))
