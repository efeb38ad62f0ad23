"""Observation recordings: what a robot saw, written once and replayed to any server.

A recording starts with the 8 bytes `MAGIC`, then a stream of msgpack documents (the
openpi/SGLang numpy format of `vla_client.codecs.msgpack_numpy`), each preceded by its length as
a 4-byte big-endian integer, so a reader can stream it and tell a truncated file from a finished
one. The first document is a header that names the format and version; every later one is an
observation: frames, state, task, per-camera capture times and the wall-clock time it was
recorded. Frames are stored as lossless PNG bytes by default (smaller than raw pixels) or as raw
arrays (``image_format="raw"``, fastest to write). Nothing is pickled, so reading a file from
someone else runs no code.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Literal, Self

import numpy as np

from vla_client.codecs import as_rgb_frame, decode_image_bytes, encode_png, map_frames
from vla_client.codecs.msgpack_numpy import packb, unpackb
from vla_client.errors import CodecError, RecordingError
from vla_client.observation import Observation

MAGIC = b"\x89VLAOBS\n"
FORMAT = "vla-client.observations"
VERSION = 1
ImageFormat = Literal["png", "raw"]
_LENGTH = struct.Struct(">I")
_MAX_RECORD_BYTES = 1 << 30


@dataclass(frozen=True)
class RecordedObservation:
    """One recorded step: the observation and the wall-clock time (`time.time()`) it was written."""

    observation: Observation
    wall_time: float


class _RecordingFile:
    """An open recording file: `close()` it, or use the reader or writer as a context manager."""

    _file: BinaryIO

    def close(self) -> None:
        """Close the file; safe to call twice."""
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ObservationWriter(_RecordingFile):
    """Append observations to a new recording file; use as a context manager.

    >>> with ObservationWriter("run.vlaobs") as writer:
    ...     writer.write(observation)
    """

    def __init__(
        self, path: str | Path, *, image_format: ImageFormat = "png", **metadata: Any
    ) -> None:
        if image_format not in ("png", "raw"):
            raise ValueError(f"image_format must be png or raw, got {image_format!r}")
        self.path = Path(path)
        self.image_format = image_format
        self.count = 0
        self._file = self.path.open("wb")
        self._file.write(MAGIC)
        header = {"format": FORMAT, "version": VERSION, "image_format": image_format}
        self._write_document({**header, "metadata": metadata, "created": time.time()})

    def write(self, observation: Observation, *, wall_time: float | None = None) -> None:
        """Append one observation."""
        names = list(observation.images)
        if self.image_format == "png":
            values: list[Any] = map_frames(lambda n: encode_png(observation.images[n]), names)
        else:
            values = [observation.images[name] for name in names]
        self._write_document({
            "images": dict(zip(names, values, strict=True)),
            "state": observation.state,
            "task": observation.task,
            "capture_times": dict(observation.capture_times),
            "wall_time": time.time() if wall_time is None else wall_time,
        })  # fmt: skip
        self.count += 1

    def _write_document(self, document: dict[str, Any]) -> None:
        data = packb(document)
        self._file.write(_LENGTH.pack(len(data)))
        self._file.write(data)


class ObservationReader(_RecordingFile):
    """Read a recording written by `ObservationWriter`; iterate it for `RecordedObservation`s.

    The header is read and checked on construction, so a wrong file fails at once with a
    `RecordingError` instead of on the first observation.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._file = self.path.open("rb")
        except OSError as exc:
            raise RecordingError(f"cannot open recording {str(path)!r}: {exc.strerror}") from None
        header = self._read_document() if self._file.read(len(MAGIC)) == MAGIC else None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            self._file.close()
            raise RecordingError(f"{str(path)!r} is not a vla-client observation recording")
        if header.get("version") != VERSION:
            self._file.close()
            raise RecordingError(
                f"{str(path)!r} is recording version {header.get('version')}; "
                f"this reader knows {VERSION}"
            )
        self.header: dict[str, Any] = header
        self.metadata: dict[str, Any] = dict(header.get("metadata") or {})

    def __iter__(self) -> Iterator[RecordedObservation]:
        while (document := self._read_document()) is not None:
            yield _to_recorded(document, self.path)

    def _read_document(self) -> Any:
        prefix = self._file.read(_LENGTH.size)
        if not prefix:
            return None
        if len(prefix) < _LENGTH.size:
            raise RecordingError(f"{str(self.path)!r} is truncated")
        (length,) = _LENGTH.unpack(prefix)
        if length > _MAX_RECORD_BYTES:
            raise RecordingError(f"{str(self.path)!r} is corrupt (a {length}-byte record)")
        data = self._file.read(length)
        if len(data) < length:
            raise RecordingError(f"{str(self.path)!r} is truncated")
        try:
            return unpackb(data)
        except CodecError as exc:
            raise RecordingError(f"{str(self.path)!r} is corrupt: {exc}") from None


def load_observations(path: str | Path) -> list[RecordedObservation]:
    """Every observation in the recording at `path`, in order."""
    with ObservationReader(path) as reader:
        return list(reader)


def _to_recorded(document: Any, path: Path) -> RecordedObservation:
    try:
        images = {
            name: _frame(value, f"images.{name}") for name, value in document["images"].items()
        }
        observation = Observation(
            images,
            state=document.get("state"),
            task=document.get("task", ""),
            capture_times=document.get("capture_times"),
        )
        return RecordedObservation(observation, float(document["wall_time"]))
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise RecordingError(f"{str(path)!r} holds a malformed observation: {exc}") from None


def _frame(value: Any, field: str) -> np.ndarray:
    if isinstance(value, bytes):
        return decode_image_bytes(value, field=field)
    return as_rgb_frame(np.array(value), field=field)


def save_action_chunks(path: str | Path, chunks: list[np.ndarray]) -> None:
    """Write action chunks, one per request, as ``actions`` [N, H, D] float32 in a ``.npz`` file.

    Chunks of different shapes cannot be stacked and raise `ValueError`.
    """
    shapes = {chunk.shape for chunk in chunks}
    if len(shapes) != 1:
        raise ValueError(f"action chunks must share one shape to be saved, got {sorted(shapes)}")
    with Path(path).open("wb") as file:
        np.savez(file, actions=np.stack(chunks).astype(np.float32))


def load_action_chunks(path: str | Path) -> np.ndarray:
    """The ``[N, H, D]`` float32 chunks in `path`, without unpickling anything.

    `path` is a ``.npz`` with an ``actions`` array (what `save_action_chunks` writes) or a
    ``.npy`` array; one ``[H, D]`` chunk reads as ``N = 1``. Raises `RecordingError` (a
    `ValueError`) for an unreadable file or chunks that are empty, non-numeric, or not finite.
    """
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise RecordingError(f"cannot read action chunks from {path}: {exc}") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            if "actions" not in loaded.files:
                raise RecordingError(f"{path} has no 'actions' array (it has {loaded.files})")
            array = loaded["actions"]
    else:
        array = loaded
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or 0 in array.shape or array.dtype.kind not in "iuf":
        raise RecordingError(
            f"{path}: expected numeric chunks [N, H, D], got {array.dtype} {array.shape}"
        )
    chunks = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(chunks).all():
        raise RecordingError(f"{path}: the chunks contain NaN or infinity")
    return chunks
