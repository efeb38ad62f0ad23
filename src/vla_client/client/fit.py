"""The contract fit: observations renamed, resized and checked as the server announced.

The client reads the server's metadata (its camera names and aliases, image size, state length)
into a `FramePreprocessor`, which fits each observation before it is encoded, so a mismatch is a
`ContractError` on the robot rather than a guess on the server. The resizes themselves are the
pure functions of `vla_client.cameras.preprocess`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from vla_client.cameras.preprocess import center_crop_resize, resize_with_pad
from vla_client.errors import ContractError, OptionFix, ProtocolError
from vla_client.observation import Observation
from vla_client.validation import check_choice, check_positive, renamed_keywords

Fit = Literal["pad", "crop", "none"]


_FITS: dict[str, Callable[[np.ndarray, int, int], np.ndarray] | None] = {
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
    @renamed_keywords(names="camera_map")  # the 0.1.0 name
    def from_metadata(
        cls,
        metadata: Mapping[str, Any],
        camera_map: Mapping[str, str] | None = None,
        fit: Fit = "pad",
    ) -> FramePreprocessor:
        """Build from the body of ``GET /v1/actions/metadata``; missing fields mean no check.

        Raises `ProtocolError` for malformed metadata and `ContractError` for an announced
        image size too small to resize to.
        """
        spec = metadata.get("input") or {}
        if not isinstance(spec, Mapping):
            raise ProtocolError(f"metadata 'input' must be an object, got {type(spec).__name__}")
        keys = spec.get("image_keys") or ()
        aliases = spec.get("camera_aliases") or {}
        state_dim = spec.get("state_dim")
        if not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys):
            raise ProtocolError(f"metadata image_keys must be a list of names, got {keys!r}")
        if not isinstance(aliases, Mapping):
            raise ProtocolError(f"metadata camera_aliases must be an object, got {aliases!r}")
        if state_dim is not None and (
            isinstance(state_dim, bool) or not isinstance(state_dim, int) or state_dim < 0
        ):
            raise ProtocolError(f"metadata state_dim must be a count, got {state_dim!r}")
        size = parse_image_size(spec.get("image_size"))
        if size is not None and min(size) < MIN_SIDE:
            raise ContractError("input.image_size", f">= {MIN_SIDE} pixels a side", size)
        return cls(
            size=size,
            fit=fit,
            camera_map=dict(camera_map or {}),
            server_keys=tuple(keys),
            aliases={str(k): str(v) for k, v in aliases.items()},
            size_required=spec.get("image_size_required") is True,
            state_dim=state_dim,
        )

    def describe(self) -> dict[str, Any]:
        """What this preprocessor checks and changes, as plain values (for people to read)."""
        return {
            "cameras": list(self.server_keys) or "any",
            "camera_aliases": dict(self.aliases),
            "camera_map": dict(self.camera_map),
            "state_dim": self.state_dim,
            "image_size": list(self.size) if self.size else None,
            "image_size_required": self.size_required,
            "resize": self.fit if self.size else "none",
        }

    def server_name(self, local: str) -> str:
        """The server key for camera `local`; `ContractError` when the server has none."""
        name = self.camera_map.get(local, local)
        if not self.server_keys or name in self.server_keys:
            return name
        if name in self.aliases:
            return self.aliases[name]
        raise ContractError(
            "input.image_keys",
            list(self.server_keys),
            f"camera {local!r}",
            fix=OptionFix(
                "camera_map",
                ({local: self.server_keys[0]},),
                before=f"{local!r} matches none of them; map it to one, for example ",
            ),
        )

    def check_names(self, local_names: list[str]) -> dict[str, str]:
        """Local name -> server key for every camera; `ContractError` for a camera the server
        does not know, two cameras landing on one key, or a key no camera fills."""
        names: dict[str, str] = {}
        for local in local_names:
            key = self.server_name(local)
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
        resize = _FITS[self.fit]
        images = {}
        for local, frame in observation.images.items():
            if self.size is not None and resize is not None:
                frame = resize(frame, *self.size)
            elif self.size_required and self.size is not None and frame.shape[:2] != self.size:
                raise ContractError(
                    "input.image_size", list(self.size), f"{local!r} at {list(frame.shape[:2])}",
                    fix=OptionFix(
                        "resize", ("pad", "crop"), "resize frames (", ") or send them at that size"
                    ),
                )  # fmt: skip
            images[names[local]] = frame
        if self.state_dim is not None:
            given = None if observation.state is None else len(observation.state)
            if given != self.state_dim:
                raise ContractError(
                    "input.state_dim",
                    f"{self.state_dim} values",
                    "none" if given is None else given,
                )
        unchanged = all(
            images[names[local]] is frame and names[local] == local
            for local, frame in observation.images.items()
        )
        if unchanged:  # nothing renamed or resized: the observation was checked when it was made
            return observation
        times = {names[k]: t for k, t in observation.capture_times.items()}
        return Observation(images, observation.state, observation.task, times)


# The dataclass writes __init__; 0.1.0 called its camera_map field `names`.
FramePreprocessor.__init__ = renamed_keywords(names="camera_map")(  # type: ignore[method-assign]
    FramePreprocessor.__init__
)


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


def parse_image_size(value: object) -> tuple[int, int] | None:
    """(height, width) from metadata's `image_size`: ``224``, ``[H, W]``, ``[H, W, C]``,
    ``[C, H, W]`` or ``{"height": H, "width": W}``; None when absent."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        dims = [value.get("height"), value.get("width")]
    elif isinstance(value, int):
        dims = [value, value]
    elif isinstance(value, list | tuple) and len(value) == 3:
        dims = list(value[:2]) if value[2] in (1, 3, 4) else list(value[1:])
    elif isinstance(value, list | tuple):
        dims = list(value)
    else:
        dims = []
    sizes = [d for d in dims if isinstance(d, int) and not isinstance(d, bool) and d > 0]
    if len(dims) != 2 or len(sizes) != 2:
        raise ProtocolError(f"metadata image_size {value!r} is not a height and width")
    return sizes[0], sizes[1]
