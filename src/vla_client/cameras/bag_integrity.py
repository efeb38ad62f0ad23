"""What a ROS 2 bag's storage says about its own integrity, checked before the bag is replayed.

**MCAP.** Each chunk record (the unit an MCAP file stores messages in) may carry the CRC-32 of
its uncompressed records: rosbag2's own writer writes one, ``rosbags``' writer writes 0, which
the format defines as "no checksum". Every chunk with a CRC is read once, uncompressed and
checked, one chunk at a time; a chunk whose CRC or size differs, or whose data does not
decompress, is *damaged*. ``rosbags`` would stop the whole read at such a chunk, so damaged
chunks are taken out of its chunk index: their messages are never read, and how many of them
were on the chosen topics is counted. A chunk without a CRC cannot be checked; it is counted.

**SQLite (.db3).** rosbag2 stores no checksum with a message. SQLite's ``PRAGMA quick_check``
checks the database's structure (pages, b-trees, record formats): it catches a file that was
truncated or overwritten in its structure, not a changed byte inside a message's payload. A
database that fails it is refused.

This reaches into the storages of a ``rosbags`` reader (``rosbags.rosbag2`` 0.10 and later).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vla_client.errors import RecordingError

_CRC_AT = 9 + 24
"""A chunk's CRC, from the chunk record's opcode: opcode and length (9 bytes), three uint64."""
_DATA_AT = 9 + 40
"""Its compressed records, less the compression name: the CRC, the name's length, the size."""


@dataclass
class Integrity:
    """What the checks found across a bag's storage files."""

    checked_chunks: int = 0
    """MCAP chunks whose CRC matched."""
    unchecked_chunks: int = 0
    """MCAP chunks without a CRC: damage inside them cannot be seen."""
    damaged_chunks: int = 0
    """MCAP chunks left out: a CRC or size that differs, or data that does not decompress."""
    lost_messages: int = 0
    """Messages on the chosen topics inside the damaged chunks."""


def check_storages(reader: Any, path: str, topics: Collection[str], found: Integrity) -> None:
    """Check every storage file of an open ``rosbags`` `reader` (an ``AnyReader``), counting in
    `found`, and take the damaged MCAP chunks out of its index. `topics` are the ones whose lost
    messages count."""
    from rosbags.rosbag2.storage_mcap import McapReader
    from rosbags.rosbag2.storage_sqlite3 import Sqlite3Reader

    for storage in _storages(reader):
        if isinstance(storage, McapReader):
            chosen = {c.id for c in storage.connections if c.topic in topics}
            storage.chunks[:] = [c for c in storage.chunks if _chunk_ok(storage, c, chosen, found)]
        elif isinstance(storage, Sqlite3Reader):
            _quick_check(Path(str(storage.path)), path)


def _storages(reader: Any) -> Iterator[Any]:
    """The storage files' readers: a bag folder's, or the one of a bag given by its file."""
    for bag in reader.readers:
        yield from getattr(bag.storage, "storages", [bag.storage])


def _chunk_ok(storage: Any, chunk: Any, chosen: Collection[int], found: Integrity) -> bool:
    """Whether `chunk` (a ``ChunkInfo`` of `storage`'s index) is not damaged; counted in
    `found` either way."""
    from rosbags.rosbag2.storage_mcap import decompress

    storage.bio.seek(chunk.chunk_start_offset + _CRC_AT)
    crc = int.from_bytes(storage.bio.read(4), "little")
    if crc == 0:
        found.unchecked_chunks += 1
        return True
    storage.bio.seek(chunk.chunk_start_offset + _DATA_AT + len(chunk.compression.encode()))
    data = storage.bio.read(chunk.compressed_size)
    try:
        decompress(data, chunk.compression, chunk.uncompressed_size, crc)
    except Exception:  # rosbags' mismatch, or whatever lz4's or zstd's decompressor raises
        found.damaged_chunks += 1
        found.lost_messages += sum(chunk.channel_count.get(cid, 0) for cid in chosen)
        return False
    found.checked_chunks += 1
    return True


def _quick_check(database: Path, path: str) -> None:
    """SQLite's structural check of `database`, read-only; a `RecordingError` when it fails."""
    with sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True) as db:
        rows = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
    db.close()
    if rows != ["ok"]:
        problems = [line for row in rows for line in row.splitlines() if not line.startswith("*")]
        raise RecordingError(
            f"bag {path}: {database.name} fails SQLite's integrity check: {'; '.join(problems)}"
        )
