"""Fit camera frames to the size and camera names the policy server expects, on the robot.

Resizing before sending means fewer bytes on the wire and no guessing on the server. The resize
is never a stretch: `resize_with_pad` keeps the aspect ratio and pads with black, exactly like
openpi's `image_tools.resize_with_pad` (the geometry is copied expression for expression and the
resampling is PIL's bilinear filter, which antialiases when shrinking where OpenCV's does not), so
a policy trained on openpi-preprocessed frames sees the same pixels. `center_crop_resize` is the
alternative for policies trained on cropped frames.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from PIL import Image

from vla_client.errors import InvalidObservationError, ProtocolError
from vla_client.observation import Observation
from vla_client.validation import check_choice, check_positive

Fit = Literal["pad", "crop"]


def resize_with_pad(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Scale `image` (HxWxC uint8) to fit `height` x `width`, keeping its aspect, on black."""
    cur_height, cur_width = image.shape[:2]
    if (cur_height, cur_width) == (height, width):
        return image
    ratio = max(cur_width / width, cur_height / height)
    resized_height = max(1, int(cur_height / ratio))
    resized_width = max(1, int(cur_width / ratio))
    resized = _bilinear(image, resized_height, resized_width)
    padded = np.zeros((height, width, *image.shape[2:]), dtype=image.dtype)
    top = max(0, int((height - resized_height) / 2))
    left = max(0, int((width - resized_width) / 2))
    padded[top : top + resized_height, left : left + resized_width] = resized
    return padded


def center_crop_resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Crop the centre of `image` to the aspect of `height` x `width`, then scale it to fit."""
    cur_height, cur_width = image.shape[:2]
    if (cur_height, cur_width) == (height, width):
        return image
    if cur_width * height > cur_height * width:
        crop_height, crop_width = cur_height, max(1, round(cur_height * width / height))
    else:
        crop_height, crop_width = max(1, round(cur_width * height / width)), cur_width
    top = (cur_height - crop_height) // 2
    left = (cur_width - crop_width) // 2
    cropped = image[top : top + crop_height, left : left + crop_width]
    return _bilinear(np.ascontiguousarray(cropped), height, width)


def _bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    resized = Image.fromarray(image).resize((width, height), resample=Image.Resampling.BILINEAR)
    return np.asarray(resized).reshape(height, width, *image.shape[2:])


_FITS: dict[str, Callable[[np.ndarray, int, int], np.ndarray]] = {
    "pad": resize_with_pad,
    "crop": center_crop_resize,
}


@dataclass(frozen=True)
class FramePreprocessor:
    """Renames cameras to the server's image keys and resizes frames to its image size.

    `names` maps local camera names to server keys; a local name that is already a server key, or
    one of the server's `camera_aliases`, needs no entry. With no `server_keys` known, names pass
    through unchanged; with no `size`, frames keep their size.
    """

    size: tuple[int, int] | None = None
    fit: Fit = "pad"
    names: Mapping[str, str] = field(default_factory=dict)
    server_keys: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice("fit", self.fit, _FITS)
        if self.size is not None:
            if not isinstance(self.size, tuple | list) or len(self.size) != 2:
                raise ValueError(f"size must be (height, width) or None; got {self.size!r}")
            for option, value in zip(("size height", "size width"), self.size, strict=True):
                check_positive(option, value, integer=True)

    @classmethod
    def from_metadata(
        cls,
        metadata: Mapping[str, Any],
        names: Mapping[str, str] | None = None,
        fit: Fit = "pad",
    ) -> FramePreprocessor:
        """Build from the body of ``GET /v1/actions/metadata``; missing fields mean no change."""
        spec = metadata.get("input") or {}
        if not isinstance(spec, Mapping):
            raise ProtocolError(f"metadata 'input' must be an object, got {type(spec).__name__}")
        aliases = spec.get("camera_aliases") or {}
        return cls(
            size=parse_image_size(spec.get("image_size")),
            fit=fit,
            names=dict(names or {}),
            server_keys=tuple(str(key) for key in spec.get("image_keys") or ()),
            aliases={str(k): str(v) for k, v in dict(aliases).items()},
        )

    def server_name(self, local: str) -> str:
        """The server key for local camera `local`; raises when the server has no such camera."""
        name = self.names.get(local, local)
        if not self.server_keys or name in self.server_keys:
            return name
        if name in self.aliases:
            return self.aliases[name]
        example = {local: self.server_keys[0]}
        raise InvalidObservationError(
            f"camera {local!r} matches none of the server's image keys {list(self.server_keys)}; "
            f"map it to one, for example names={example}"
        )

    def check_names(self, local_names: list[str]) -> None:
        """Fail early when cameras cannot be mapped or two would land on one server key."""
        seen: dict[str, str] = {}
        for local in local_names:
            key = self.server_name(local)
            if key in seen:
                raise InvalidObservationError(
                    f"cameras {seen[key]!r} and {local!r} both map to server key {key!r}"
                )
            seen[key] = local

    def __call__(self, observation: Observation) -> Observation:
        self.check_names(list(observation.images))
        resize = _FITS[self.fit]
        images = {
            self.server_name(name): resize(image, *self.size) if self.size else image
            for name, image in observation.images.items()
        }
        times = {self.server_name(k): t for k, t in observation.capture_times.items()}
        return Observation(images, observation.state, observation.task, times)


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
