"""The attachment rmw_zenoh puts beside every sample's payload.

rmw_zenoh writes it with Zenoh's serializer: the publisher's sequence number (a 64-bit integer,
little-endian, counting from 1), the source timestamp (nanoseconds since the Unix epoch, 64-bit
little-endian) and the publisher's GID, a fixed array of 16 bytes that Zenoh writes as a
sequence: its length (16, one byte) and then the bytes. rmw_zenoh refuses an attachment whose
GID is not 16 bytes, and so does `Attachment.decode`. A subscriber reads the source time from
it, as ``rmw_message_info_t`` does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

GID_SIZE = 16  # RMW_GID_STORAGE_SIZE
_LAYOUT = struct.Struct(f"<QQB{GID_SIZE}s")


@dataclass(frozen=True)
class Attachment:
    """A sample's sequence number, source time (ns since the epoch) and publisher GID."""

    sequence: int
    source_time_ns: int
    gid: bytes

    def encode(self) -> bytes:
        if len(self.gid) != GID_SIZE:
            raise ValueError(f"a GID of {len(self.gid)} bytes: rmw_zenoh's are {GID_SIZE}")
        return _LAYOUT.pack(self.sequence, self.source_time_ns, GID_SIZE, self.gid)

    @classmethod
    def decode(cls, data: bytes) -> Attachment:
        """The attachment in `data`; ValueError naming what is wrong when it is not one."""
        if len(data) != _LAYOUT.size:
            raise ValueError(f"an attachment of {len(data)} bytes (rmw_zenoh's are {_LAYOUT.size})")
        sequence, source_time_ns, length, gid = _LAYOUT.unpack(data)
        if length != GID_SIZE:
            raise ValueError(f"an attachment whose GID length says {length}, not {GID_SIZE}")
        return cls(sequence, source_time_ns, gid)
