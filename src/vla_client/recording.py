"""Observation recordings: what a robot saw, written once and replayed to any server.

A recording starts with the 8 bytes `MAGIC`, then a stream of msgpack documents (the
openpi/SGLang numpy format of `vla_client.codecs.msgpack_numpy`), each preceded by its length as
a 4-byte big-endian integer, so a reader can stream it and tell a truncated file from a finished
one. The first document is a header that names the format and version; every later one is a
step: an observation (frames, state, task, per-camera capture times), the wall-clock time it was
recorded and, in recordings a server makes, what the server did with it (`ServedRequest`: the
request's parameters, the actions returned, timings); in recordings a control loop makes
(``ControlLoop(record=writer.record)``), the action the robot was given on that tick
(``applied_action``) and the episode it belongs to (``episode``). Those two fields came after
the format's first files and are optional, so files without them read as before (``None``) and
readers that predate them skip them: the format's version is still 1. Depth frames
(`Observation.depth`) came later too, in a ``depth`` map of their own beside ``images``, left
out when there are none. Frames are stored as lossless PNG bytes by default (smaller than raw
pixels), as JPEG bytes (``image_format="jpeg"``, quality 90: several times smaller, lossy, for
recordings that only need to be looked at or replayed roughly) or as raw arrays
(``image_format="raw"``, fastest to write); uint16 depth as 16-bit PNG with PNG or JPEG (depth
is never stored lossy) and raw with raw, float32 depth always raw (a float has no lossless PNG).
Nothing is pickled, so reading a file from someone else runs no code.

Writes are unbuffered and a failed write is cut back to the last complete step, so a file whose
disk filled up still reads to its last whole step.
"""

from __future__ import annotations

import contextlib
import math
import os
import struct
import time
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Literal, TypeVar

import numpy as np

from vla_client.codecs import (
    as_rgb_frame,
    decode_image_bytes,
    encode_jpeg,
    encode_png,
    map_frames,
)
from vla_client.codecs.depth import as_depth_frame, decode_depth_png, encode_depth_png
from vla_client.codecs.msgpack_numpy import packb, unpackb
from vla_client.errors import (
    CodecError,
    PayloadTooLargeError,
    RecordingError,
    TruncatedRecordingError,
)
from vla_client.observation import Observation
from vla_client.protocol import DecodeLimits
from vla_client.protocol.image_forms import encodes_in_parallel
from vla_client.protocol.names import RECORDING_SUFFIX
from vla_client.validation import check_at_least, check_choice

MAGIC = b"\x89VLAOBS\n"
FORMAT = "vla-client.observations"
VERSION = 1
SUFFIX = RECORDING_SUFFIX
IMAGE_FORMATS = ("png", "jpeg", "raw")
ImageFormat = Literal["png", "jpeg", "raw"]
_ENCODERS = {"png": encode_png, "jpeg": encode_jpeg}
"""The image formats stored as encoded bytes, and their encoders (raw frames are stored as they
are)."""
_LENGTH = struct.Struct(">I")
_MAX_RECORD_BYTES = 1 << 30


@dataclass(frozen=True)
class ServedRequest:
    """What a server did with a recorded observation: the request's `parameters`, the float32
    `actions` it returned, its `timings` in ms and the request's id."""

    actions: np.ndarray
    parameters: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    request_id: str | None = None


@dataclass(frozen=True)
class RecordedObservation:
    """One recorded step: the observation, the wall-clock time (`time.time()`) it was recorded
    and, in a server's recording, what the server answered (`served`); in a control loop's,
    the float32 action applied on that tick (`applied_action`) and its `episode` number."""

    observation: Observation
    wall_time: float
    served: ServedRequest | None = None
    applied_action: np.ndarray | None = None
    episode: int | None = None


@dataclass(frozen=True)
class EncodedStep:
    """A step encoded for a recording (see `encode_step`); `size` is the bytes it takes."""

    data: bytes
    image_format: ImageFormat

    @property
    def size(self) -> int:
        return len(self.data)


def encode_step(
    observation: Observation,
    *,
    image_format: ImageFormat = "png",
    wall_time: float | None = None,
    served: ServedRequest | None = None,
    parallel: bool = True,
    applied_action: np.ndarray | None = None,
    episode: int | None = None,
) -> EncodedStep:
    """`observation` as the bytes a recording stores for it, length prefix included.

    Encoding apart from writing lets a caller see a step's size before choosing the file it goes
    to. `parallel=False` encodes the frames one after another on the calling thread instead of
    the shared codec threads (a background recorder should not compete with request decoding);
    with fpng writing the PNGs they go one after another anyway (`encodes_in_parallel`).
    `applied_action` (a finite 1-D numeric vector, stored as float32) and `episode` (an integer
    >= 0) are a control loop's; anything else is a `ValueError`.
    """
    _check_image_format(image_format)
    action = None if applied_action is None else _checked_action(applied_action)
    if episode is not None:
        check_at_least("episode", episode, 0, integer=True)
    document: dict[str, Any] = {
        "images": _stored_images(observation, image_format, parallel=parallel),
        "state": observation.state,
        "task": observation.task,
        "capture_times": dict(observation.capture_times),
        "wall_time": time.time() if wall_time is None else _checked_time(wall_time),
    }
    if served is not None:
        document["served"] = _served_document(served)
    if action is not None:
        document["applied_action"] = action
    if episode is not None:
        document["episode"] = int(episode)
    if observation.depth:
        document["depth"] = _stored_depth(observation, image_format)
    data = packb(document)
    return EncodedStep(_LENGTH.pack(len(data)) + data, image_format)


def _stored_images(
    observation: Observation, image_format: ImageFormat, *, parallel: bool
) -> dict[str, Any]:
    """The frames as a recording stores them: PNG or JPEG bytes (encoded in the codec threads
    when `parallel` and the encoder gains by it), or the arrays as they are."""
    names = list(observation.images)
    frames = [observation.images[name] for name in names]
    encode = _ENCODERS.get(image_format)
    values: list[Any]
    if encode is None:
        values = frames
    elif parallel and encodes_in_parallel(image_format, "msgpack"):
        values = map_frames(encode, frames)
    else:
        values = [encode(frame) for frame in frames]
    return dict(zip(names, values, strict=True))


def _stored_depth(observation: Observation, image_format: ImageFormat) -> dict[str, Any]:
    """The depth frames as a recording stores them: uint16 as 16-bit PNG bytes with the
    ``png`` or ``jpeg`` format (depth is never stored lossy), everything else (float32 always)
    as the arrays."""
    return {
        name: encode_depth_png(frame)
        if image_format != "raw" and frame.dtype == np.uint16
        else frame
        for name, frame in observation.depth.items()
    }


def _served_document(served: ServedRequest) -> dict[str, Any]:
    """What a server answered, as a recording stores it beside the request."""
    return {
        "actions": np.asarray(served.actions, dtype=np.float32),
        "parameters": served.parameters,
        "timings": served.timings,
        "request_id": served.request_id,
    }


def _checked_time(value: object, where: str = "wall_time") -> float:
    """`value` as a finite number of seconds, or a `ValueError` naming `where`: a replay paces
    itself by these times, and NaN or infinity has no place in a clock."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{where} must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{where} must be a finite number of seconds, got {value!r}")
    return seconds


def _checked_action(action: object) -> np.ndarray:
    """`action` as a float32 vector, or a `ValueError` saying why it cannot be one."""
    array = np.asarray(action)
    if array.dtype.kind not in "iuf" or array.ndim != 1 or array.size == 0:
        raise ValueError(
            f"applied_action must be a non-empty 1-D numeric vector; got {array.dtype} "
            f"of shape {list(array.shape)}"
        )
    if not np.isfinite(array).all():
        raise ValueError("applied_action contains NaN or infinity")
    return array.astype(np.float32)


def is_recording(path: str | Path) -> bool:
    """True when the file at `path` starts like an observation recording (no other check)."""
    try:
        with Path(path).open("rb") as file:
            return file.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


_OpenFileT = TypeVar("_OpenFileT", bound="_RecordingFile")  # typing.Self is 3.11+


class _RecordingFile:
    """An open recording file: `close()` it, or use the reader or writer as a context manager."""

    _file: BinaryIO

    def close(self) -> None:
        """Close the file; safe to call twice."""
        self._file.close()

    def __enter__(self: _OpenFileT) -> _OpenFileT:
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

    `exclusive=True` refuses to replace an existing file (`FileExistsError`). `private=True`
    creates the file readable and writable by its owner only (0600), as a server's recordings
    of camera frames are; otherwise the umask decides, as for any new file. `size` is the bytes
    written so far; every step is on disk (in the OS's hands) when `write` returns.

    A control loop records through `record` (``ControlLoop(record=writer.record)``): each
    applied action with the observation of its tick, in the writer's current `episode` (0 at
    first; `next_episode()` starts the next). The keyword `metadata` goes into the header:
    ``fps=`` (the loop's rate) and a robot's names (`LeRobotRobot.recording_metadata()`) are
    what ``vla-client export --lerobot`` reads from it.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        image_format: ImageFormat = "png",
        exclusive: bool = False,
        private: bool = False,
        **metadata: Any,
    ) -> None:
        _check_image_format(image_format)
        for option, value in (("exclusive", exclusive), ("private", private)):
            if not isinstance(value, bool):
                raise ValueError(f"{option} must be True or False; got {value!r}")
        self.path = Path(path)
        self.image_format = image_format
        self.count = 0
        self.size = 0
        self._episode = 0
        flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
        descriptor = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0),
                             0o600 if private else 0o666)  # fmt: skip
        self._file = os.fdopen(descriptor, "wb", buffering=0)
        header = {"format": FORMAT, "version": VERSION, "image_format": image_format}
        document = packb({**header, "metadata": metadata, "created": time.time()})
        header_bytes = MAGIC + _LENGTH.pack(len(document)) + document
        try:
            self._write_all(header_bytes)
        except OSError:
            self._file.close()
            raise
        self.size = len(header_bytes)

    def write(
        self,
        observation: Observation,
        *,
        wall_time: float | None = None,
        served: ServedRequest | None = None,
        applied_action: np.ndarray | None = None,
        episode: int | None = None,
    ) -> None:
        """Append one observation (and what a server did with it, for a server's recording;
        the action applied and its episode, for a control loop's: see `encode_step`)."""
        step = encode_step(
            observation,
            image_format=self.image_format,
            wall_time=wall_time,
            served=served,
            applied_action=applied_action,
            episode=episode,
        )
        self.append(step)

    @property
    def episode(self) -> int:
        """The episode number `record` writes: 0 until `next_episode()` is called."""
        return self._episode

    def next_episode(self) -> int:
        """Start the next episode: later `record` calls write it. Returns its number."""
        self._episode += 1
        return self._episode

    def record(self, observation: Observation, action: np.ndarray) -> None:
        """Append a control loop's tick: what it observed and the action it applied, in the
        current `episode`. Made to be a `ControlLoop`'s ``record``."""
        self.write(observation, applied_action=action, episode=self._episode)

    def append(self, step: EncodedStep) -> None:
        """Append a step made by `encode_step`; a failed write leaves the file as it was."""
        if step.image_format != self.image_format:
            raise ValueError(
                f"{self.path} stores {self.image_format} frames, the step has {step.image_format}"
            )
        try:
            self._write_all(step.data)
        except OSError:
            with contextlib.suppress(OSError):  # keep the file readable to its last whole step
                os.ftruncate(self._file.fileno(), self.size)
                self._file.seek(self.size)
            raise
        self.size += step.size
        self.count += 1

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._file.write(view)  # an unbuffered write may take only part
            if not written:
                raise OSError(f"cannot write to {self.path}")
            view = view[written:]


class ObservationReader(_RecordingFile):
    """Read a recording written by `ObservationWriter`; iterate it for `RecordedObservation`s.

    The header is read and checked on construction, so a wrong file fails at once with a
    `RecordingError` (one line naming the file and the problem) instead of on the first step.

    A recording is input like any request, and may be crafted: each step is held to `limits`,
    the server's own (`DecodeLimits`: at most 16 cameras, 4096 x 4096 pixels a frame by
    default, so at most their product a step), the cameras counted and each frame's size read
    from its PNG/JPEG header before anything is decoded. A step past them is a `RecordingError`
    naming the step; to read a recording made with larger limits, pass them.
    """

    def __init__(self, path: str | Path, *, limits: DecodeLimits | None = None) -> None:
        if limits is not None and not isinstance(limits, DecodeLimits):
            raise ValueError(f"limits must be a DecodeLimits or None; got {limits!r}")
        self.path = Path(path)
        self.limits = limits or DecodeLimits()
        self._name = repr(str(path))
        try:
            self._file = self.path.open("rb")
        except OSError as exc:
            raise RecordingError(f"cannot open recording {self._name}: {exc.strerror}") from None
        try:
            header = self._read_header()
        except RecordingError:
            self._file.close()
            raise
        self.header: dict[str, Any] = header
        self.metadata: dict[str, Any] = dict(header.get("metadata") or {})
        self._start = self._file.tell()

    def __iter__(self) -> Iterator[RecordedObservation]:
        for _, step in self.read():
            yield step

    def read(
        self, indices: Container[int] | None = None
    ) -> Iterator[tuple[int, RecordedObservation]]:
        """Each step with its position in the file (from 0), from the first step on.

        Steps whose position is not in `indices` are skipped without being decoded.
        """
        for index, data in enumerate(self._records()):
            if indices is None or index in indices:
                yield index, _to_recorded(self._unpack(data), self._name, index, self.limits)

    def wall_times(self) -> list[float]:
        """When each step was recorded, read without decoding any frame; the whole file is
        checked on the way (a truncated or corrupt one raises `RecordingError`)."""
        times = []
        for index, data in enumerate(self._records()):
            document = self._unpack(data)
            try:
                times.append(_checked_time(document["wall_time"], f"step {index}'s wall_time"))
            except (KeyError, TypeError, ValueError) as exc:
                raise RecordingError(
                    f"{self._name} holds a malformed step {index}: no usable wall time ({exc})"
                ) from None
        return times

    def _records(self) -> Iterator[bytes]:
        self._file.seek(self._start)
        index = 0
        while (data := self._read_record(f"step {index}")) is not None:
            yield data
            index += 1

    def _read_header(self) -> dict[str, Any]:
        magic = self._file.read(len(MAGIC))
        if magic != MAGIC:
            problem = "it is empty" if not magic else "it does not start like one"
            raise RecordingError(
                f"{self._name} is not a vla-client observation recording ({problem})"
            )
        data = self._read_record("header")
        if data is None:
            raise RecordingError(f"{self._name} is truncated: it ends before its header")
        header = self._unpack(data)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise RecordingError(
                f"{self._name} is not a vla-client observation recording (unknown header)"
            )
        version = header.get("version")
        if isinstance(version, int) and version > VERSION:
            raise RecordingError(
                f"{self._name} was written by a newer vla-client (recording format version "
                f"{version}; this one reads version {VERSION}): upgrade vla-client to read it"
            )
        if version != VERSION:
            raise RecordingError(f"{self._name} has an unknown recording version {version!r}")
        return header

    def _read_record(self, what: str) -> bytes | None:
        """The next length-prefixed record, or None at the end of the file; `what` names the
        record in errors."""
        prefix = self._file.read(_LENGTH.size)
        if not prefix:
            return None
        truncated = TruncatedRecordingError(f"{self._name} is truncated: it ends inside its {what}")
        if len(prefix) < _LENGTH.size:
            raise truncated
        (length,) = _LENGTH.unpack(prefix)
        if length > _MAX_RECORD_BYTES:
            raise RecordingError(f"{self._name} is corrupt: its {what} claims {length} bytes")
        data = self._file.read(length)
        if len(data) < length:
            raise truncated
        return data

    def _unpack(self, data: bytes) -> Any:
        try:
            return unpackb(data)
        except CodecError as exc:
            raise RecordingError(f"{self._name} is corrupt: {exc}") from None


def load_observations(path: str | Path) -> list[RecordedObservation]:
    """Every observation in the recording at `path`, in order."""
    with ObservationReader(path) as reader:
        return list(reader)


def _check_image_format(image_format: str) -> None:
    check_choice("image_format", image_format, IMAGE_FORMATS)


def _to_recorded(document: Any, name: str, index: int, limits: DecodeLimits) -> RecordedObservation:
    try:
        images = _frames(document["images"], limits)
        observation = Observation(
            images,
            state=document.get("state"),
            task=document.get("task", ""),
            capture_times=document.get("capture_times"),
            depth=_frames(document.get("depth") or {}, limits, "depth"),
        )
        served = document.get("served")
        applied = document.get("applied_action")
        episode = document.get("episode")
        if episode is not None and (type(episode) is not int or episode < 0):
            raise ValueError(f"step {index} has episode {episode!r}, not an integer >= 0")
        return RecordedObservation(
            observation,
            _checked_time(document["wall_time"], f"step {index}'s wall_time"),
            None if served is None else _served(served),
            None if applied is None else _checked_action(applied),
            episode,
        )
    except PayloadTooLargeError as exc:
        raise RecordingError(f"{name}: step {index} is over the limits: {exc}") from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise RecordingError(f"{name} holds a malformed observation: {exc}") from None


def _served(document: dict[str, Any]) -> ServedRequest:
    return ServedRequest(
        actions=np.asarray(document["actions"], dtype=np.float32),
        parameters=dict(document.get("parameters") or {}),
        timings={str(k): float(v) for k, v in (document.get("timings") or {}).items()},
        request_id=document.get("request_id"),
    )


def _frames(
    images: dict[str, Any], limits: DecodeLimits, kind: str = "images"
) -> dict[str, np.ndarray]:
    """A step's frames (`kind` ``images`` or ``depth``), decoded within `limits`: the cameras
    counted before any is decoded, each PNG/JPEG frame's size checked from its header first."""
    if len(images) > limits.max_cameras:
        raise PayloadTooLargeError(
            f"{len(images)} cameras, over the limit of {limits.max_cameras}", field=kind
        )
    return {key: _frame(value, f"{kind}.{key}", limits, kind) for key, value in images.items()}


def _frame(value: Any, where: str, limits: DecodeLimits, kind: str) -> np.ndarray:
    depth = kind == "depth"
    if isinstance(value, bytes):
        decode = decode_depth_png if depth else decode_image_bytes
        return decode(value, max_pixels=limits.max_image_pixels, field=where)
    frame = (as_depth_frame if depth else as_rgb_frame)(np.array(value), field=where)
    height, width = frame.shape[:2]
    if height * width > limits.max_image_pixels:
        raise PayloadTooLargeError(
            f"image is {width}x{height} = {width * height} pixels, over the limit of "
            f"{limits.max_image_pixels}",
            field=where,
        )
    return frame


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
