"""The contract fit: observations renamed, resized and checked as the server announced.

The client reads the server's metadata (its camera names and aliases, image size, state length)
into a `FramePreprocessor`, which fits each observation before it is encoded, so a mismatch is a
`ContractError` on the robot rather than a guess on the server. The resizes themselves are the
pure functions of `vla_client.cameras.preprocess`. The metadata itself is read by the protocol's
one metadata type (`vla_client.protocol.ActionMetadata`), which the server builds its document
from too. `parse_image_size`, how that type reads ``image_size``, lives with the other field
readers in `vla_client.protocol.metadata_fields` and still imports from here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from vla_client.cameras.preprocess import center_crop_resize, resize_with_pad
from vla_client.errors import ContractError, OptionFix
from vla_client.observation import Observation
from vla_client.protocol.metadata_fields import parse_image_size as parse_image_size
from vla_client.protocol.models import ActionMetadata, read_metadata
from vla_client.validation import check_choice, check_positive

Fit = Literal["pad", "crop", "none"]


_FITS: dict[str, Callable[..., np.ndarray] | None] = {
    "pad": resize_with_pad,
    "crop": center_crop_resize,
    "none": None,
}
FITS: tuple[Fit, ...] = ("pad", "crop", "none")
MIN_SIDE = 8
"""Smallest image side a resize may produce; smaller is a mistake, not a policy input."""


@dataclass(frozen=True)
class FramePreprocessor:
    """Fits observations to what a server announced: camera names, image size, state length.

    `camera_map` maps the robot's camera names to the server's keys; a camera already named
    after a server key, or after one of the server's `aliases` (alias -> key), needs no entry.
    Frames are resized to `size` (height, width) with `fit`: ``pad`` keeps the aspect ratio on
    black (openpi's ``resize_with_pad``), ``crop`` cuts the centre to the aspect first, ``none``
    leaves them. With `size_required`, a frame of another size is refused rather than sent;
    with `state_dim`, so is a state of another length (or none). With no `server_keys` known,
    any camera names pass; whatever the server did not announce is not checked.

    Depth frames (`Observation.depth`) are checked against `depth_cameras` (name -> dtype,
    from the metadata's ``input.depth_cameras``; None: not known, so not checked): each must be
    a depth camera the server announces (after `camera_map`), of the dtype it announces, and
    every announced one must come; a server that announces none takes none. They are resized
    as the colour frames are, by nearest neighbour (never blended: a depth value is a
    measurement), or refused at another size with `size_required`.

    A mismatch raises `ContractError` naming the field, what the server expects and what the
    observation has.
    """

    size: tuple[int, int] | None = None
    fit: Fit = "pad"
    camera_map: Mapping[str, str] = field(default_factory=dict)
    server_keys: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    size_required: bool = False
    state_dim: int | None = None
    depth_cameras: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        check_choice("fit", self.fit, _FITS)
        check_camera_map(self.camera_map)
        if self.size is not None:
            if not isinstance(self.size, tuple | list) or len(self.size) != 2:
                raise ValueError(f"size must be (height, width) or None; got {self.size!r}")
            for option, value in zip(("size height", "size width"), self.size, strict=True):
                check_positive(option, value, integer=True)
            if min(self.size) < MIN_SIDE:
                raise ValueError(f"image size {self.size} is under {MIN_SIDE} pixels a side")

    @classmethod
    def from_metadata(
        cls,
        metadata: ActionMetadata | Mapping[str, Any],
        camera_map: Mapping[str, str] | None = None,
        fit: Fit = "pad",
    ) -> FramePreprocessor:
        """Build from the server's metadata: `ActionMetadata` (what `ActionClient.metadata`
        returns), or the body of ``GET /v1/actions/metadata`` as a dict, read into one by
        `vla_client.protocol.read_metadata`. Missing fields mean no check.

        Raises `ProtocolError` for malformed metadata (a dict the reader refuses) and
        `ContractError` for an announced image size too small to resize to.
        """
        if isinstance(metadata, Mapping):
            metadata = read_metadata(metadata)
        spec = metadata.input
        size = None if spec.image_size is None else (spec.image_size[0], spec.image_size[1])
        if size is not None and min(size) < MIN_SIDE:
            raise ContractError("input.image_size", f">= {MIN_SIDE} pixels a side", size)
        return cls(
            size=size,
            fit=fit,
            camera_map=dict(camera_map or {}),
            server_keys=tuple(spec.image_keys),
            aliases=dict(spec.camera_aliases),
            size_required=spec.image_size_required,
            state_dim=spec.state_dim,
            depth_cameras=dict(spec.depth_cameras),
        )

    def describe(self) -> dict[str, Any]:
        """What this preprocessor checks and changes, as plain values (for people to read);
        ``depth_cameras`` only where the server announces some."""
        described: dict[str, Any] = {
            "cameras": list(self.server_keys) or "any",
            "camera_aliases": dict(self.aliases),
            "camera_map": dict(self.camera_map),
            "state_dim": self.state_dim,
            "image_size": list(self.size) if self.size else None,
            "image_size_required": self.size_required,
            "resize": self.fit if self.size else "none",
        }
        if self.depth_cameras:
            described["depth_cameras"] = dict(self.depth_cameras)
        return described

    def server_name(self, local: str, others: Collection[str] = ()) -> str:
        """The server key for camera `local`; `ContractError` when the server has none.

        `others` are the robot's other cameras: the mapping the error proposes sends `local`
        (and any of them the server does not know either) to server cameras none of them
        already fills.
        """
        key = self._known_key(local)
        if key is not None:
            return key
        target = self.camera_map.get(local)  # None: not mapped, its own name is unknown
        keys = list(self.server_keys)
        cameras = [local, *(other for other in others if other != local)]
        taken = {self._known_key(other) for other in cameras}
        free = [key for key in keys if key not in taken]
        given = f"camera {local!r}" + (f" mapped to {target!r}" if target else "")
        problem = (
            f"{target!r} is not a server camera" if target else f"{local!r} matches none of them"
        )
        if not free:
            raise ContractError(
                "input.image_keys", keys, given,
                f"{problem} and the other cameras fill them all: send {len(keys)} camera(s)",
            )  # fmt: skip
        unknown = [other for other in cameras if self._known_key(other) is None]
        # `local` first; the other unknown cameras too, unless a map of theirs is at fault
        proposal = dict(
            zip((u for u in unknown if u == local or u not in self.camera_map), free, strict=False)
        )
        raise ContractError(
            "input.image_keys",
            keys,
            given,
            fix=OptionFix(
                "camera_map",
                (proposal,),
                before=f"{problem}; map it to one, for example ",
            ),
        )

    def _known_key(self, local: str) -> str | None:
        """The server key `local` is sent under when the server knows it (by name, alias or
        `camera_map`), else None."""
        name = self.camera_map.get(local, local)
        if not self.server_keys or name in self.server_keys:
            return name
        return self.aliases.get(name)

    def check_names(self, local_names: list[str]) -> dict[str, str]:
        """Local name -> server key for every camera; `ContractError` for a camera the server
        does not know, two cameras landing on one key, or a key no camera fills."""
        names: dict[str, str] = {}
        for local in local_names:
            key = self.server_name(local, local_names)
            clash = [other for other, taken in names.items() if taken == key]
            if clash:
                raise ContractError(
                    "input.image_keys",
                    "one camera per key",
                    f"{clash[0]!r} and {local!r} on {key!r}",
                )
            names[local] = key
        missing = sorted(set(self.server_keys) - set(names.values()))
        if missing:
            raise ContractError(
                "input.image_keys",
                list(self.server_keys),
                sorted(names.values()),
                f"missing {missing}",
            )
        return names

    def __call__(self, observation: Observation) -> Observation:
        """`observation` renamed, resized and checked as the server announced."""
        names = self.check_names(list(observation.images))
        depth_names = self.check_depth(observation.depth)
        names.update(depth_names)
        images = {names[local]: self._sized(local, f) for local, f in observation.images.items()}
        depth = {
            names[local]: self._sized(local, f, nearest=True)
            for local, f in observation.depth.items()
        }
        if self.state_dim is not None:
            given = None if observation.state is None else len(observation.state)
            if given != self.state_dim:
                raise ContractError(
                    "input.state_dim",
                    f"{self.state_dim} values",
                    "none" if given is None else given,
                )
        unchanged = all(
            {**images, **depth}[names[local]] is frame and names[local] == local
            for local, frame in {**observation.images, **observation.depth}.items()
        )
        if unchanged:  # nothing renamed or resized: the observation was checked when it was made
            return observation
        times = {names[k]: t for k, t in observation.capture_times.items()}
        return Observation(images, observation.state, observation.task, times, depth)

    def _sized(self, local: str, frame: np.ndarray, *, nearest: bool = False) -> np.ndarray:
        """`frame` resized to `size` as `fit` says, or refused at another size when the size is
        required; as it is otherwise."""
        resize = _FITS[self.fit]
        if self.size is not None and resize is not None:
            return resize(frame, *self.size, nearest=nearest)
        if self.size_required and self.size is not None and frame.shape[:2] != self.size:
            raise ContractError(
                "input.image_size", list(self.size), f"{local!r} at {list(frame.shape[:2])}",
                fix=OptionFix(
                    "resize", ("pad", "crop"), "resize frames (", ") or send them at that size"
                ),
            )  # fmt: skip
        return frame

    def check_depth(self, depth: Mapping[str, np.ndarray]) -> dict[str, str]:
        """Local name -> server name for every depth camera (renamed by `camera_map`);
        `ContractError` for a depth camera the server does not announce, a frame of another
        dtype than announced, or an announced depth camera with no frame. Unchecked when the
        server's depth cameras are not known (`depth_cameras` None)."""
        names = {local: self.camera_map.get(local, local) for local in depth}
        announced = self.depth_cameras
        if announced is None:
            return names
        unknown = sorted(local for local, name in names.items() if name not in announced)
        missing = sorted(set(announced) - set(names.values()))
        if unknown or missing:
            given = f"depth {sorted(names.values())}" if names else "no depth"
            hint = (
                f"unknown {unknown}, missing {missing}"
                if announced
                else "this server takes no depth frames"
            )
            raise ContractError("input.depth_cameras", dict(announced) or "none", given, hint)
        wrong = {n: depth[local].dtype.name for local, n in names.items()
                 if depth[local].dtype.name != announced[n]}  # fmt: skip
        if wrong:
            raise ContractError(
                "input.depth_cameras", dict(announced), f"depth of dtype {wrong}",
                "depth is never converted: send uint16 millimetres or float32 metres as asked",
            )  # fmt: skip
        return names


def check_camera_map(camera_map: Mapping[str, str]) -> None:
    """`ValueError` unless `camera_map` maps names to names, and no two to the same camera."""
    if not isinstance(camera_map, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and k and v for k, v in camera_map.items()
    ):
        raise ValueError(f"camera_map must map camera names to camera names, got {camera_map!r}")
    targets: dict[str, str] = {}
    for local, target in camera_map.items():
        if target in targets:
            raise ValueError(
                f"camera_map sends both {targets[target]!r} and {local!r} to {target!r}"
            )
        targets[target] = local
