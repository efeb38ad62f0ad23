"""openpi observation layouts: how an `Observation` becomes the dict an openpi policy reads.

openpi's websocket server hands each message, a plain dict, to its policy's input transform, and
every robot family reads its own keys. A layout names them: which camera of the observation
goes under which key (and in which pixel order), how the state vector is split, where the task
text goes. The client builds requests with `OpenpiLayout.encode`; a server that speaks the
layout reads them back with `OpenpiLayout.to_flat`, into the flat form every decoder here reads.

The built-in layouts, each matching openpi's example client and policy input transform:

- ``flat`` (the default): ``observation.images.<camera>`` HxWx3 uint8 for any cameras,
  ``observation.state``, ``prompt``. SGLang's ``/openpi/policy`` reads this.
- ``droid`` (openpi ``examples/droid``, ``DroidInputs``): cameras ``exterior_image_1_left`` and
  ``wrist_image_left`` as ``observation/<camera>``, HxWx3 uint8; the state's 8 values split into
  ``observation/joint_position`` (7) and ``observation/gripper_position`` (1); ``prompt``.
  Replies carry ``[10, 8]`` chunks (joint velocities and gripper). Frames 224x224.
- ``libero`` (``examples/libero``, ``LiberoInputs``): cameras ``image`` and ``wrist_image`` as
  ``observation/<camera>``, HxWx3 uint8; ``observation/state`` (8); ``prompt``. Frames 224x224.
- ``aloha`` (``examples/aloha_real``, ``AlohaInputs``): cameras ``cam_high``, ``cam_low``,
  ``cam_left_wrist``, ``cam_right_wrist`` in an ``images`` dict, each 3xHxW uint8 (channels
  first); ``state`` (14); ``prompt``. Replies carry ``[H, 14]`` chunks. Frames 224x224.

Each example client resizes its frames on the robot (openpi's ``resize_with_pad``) to the
layout's `OpenpiLayout.image_size`, and openpi's servers announce no size: a client's ``resize``
uses the layout's size when the server gives none. Requests carry exactly the layout's keys
(and the sampling parameters asked for), and the state keeps the robot's dtype: the examples
send float64 joints and gripper as the robot reports them.

Name the robot's cameras after the layout's with the client's ``camera_map``. Anything else is
a function from `Observation` to dict, passed where a layout is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vla_client.errors import CodecError, ContractError, OptionFix
from vla_client.observation import Observation
from vla_client.validation import check_choice

FLAT_IMAGE_PREFIX = "observation.images."
FLAT_STATE_KEY = "observation.state"


@dataclass(frozen=True)
class StatePart:
    """`size` values of the state vector under `key` (None: all of it, any length)."""

    key: str
    size: int | None


@dataclass(frozen=True)
class OpenpiLayout:
    """Where an observation's frames, state and task go in an openpi request.

    `cameras` are the observation's camera names the layout needs (empty: any); each frame
    goes under ``image_key.format(camera=name)``, inside the dict `images_field` when set, as
    HxWx3 or, with `channels_first`, 3xHxW uint8. The state is split into `state` in order.
    `image_size` (height, width) is the size openpi's example client resizes frames to on the
    robot (None: no size of its own).
    """

    name: str
    cameras: tuple[str, ...]
    image_key: str
    state: tuple[StatePart, ...]
    images_field: str | None = None
    channels_first: bool = False
    prompt_key: str = "prompt"
    image_size: tuple[int, int] | None = None

    @property
    def state_dim(self) -> int | None:
        """The state length the layout needs, or None when any length goes."""
        sizes = [part.size for part in self.state]
        return None if None in sizes else sum(s for s in sizes if s is not None)

    def encode(self, observation: Observation, images: Mapping[str, Any]) -> dict[str, Any]:
        """The request dict for `observation`, its frames already in wire form (`images`).

        Raises `ContractError` when the observation cannot fill the layout.
        """
        self.check(observation)
        return self.request(images, observation.state, observation.task)

    def request(self, images: Mapping[str, Any], state: Any, task: str) -> dict[str, Any]:
        """The request dict for frames (in wire form), a state vector (or None) and a task."""
        request: dict[str, Any] = {}
        frames = {
            self.image_key.format(camera=name): _channels_first(value) if self.channels_first
            else value
            for name, value in images.items()
        }  # fmt: skip
        if self.images_field is None:
            request.update(frames)
        else:
            request[self.images_field] = frames
        if state is not None:
            start = 0
            for part in self.state:
                end = len(state) if part.size is None else start + part.size
                request[part.key] = state[start:end]
                start = end
        request[self.prompt_key] = task
        return request

    def check(self, observation: Observation) -> None:
        """`ContractError` naming what the observation lacks for this layout."""
        self._check_cameras(sorted(observation.images))
        expected = self.state_dim
        given = None if observation.state is None else len(observation.state)
        if expected is not None and given != expected:
            split = " + ".join(f"{p.key} ({p.size})" for p in self.state)
            raise ContractError(
                f"openpi layout {self.name!r} state", f"{expected} values ({split})", given
            )

    def _check_cameras(self, names: list[str]) -> None:
        """`ContractError` unless the observation's camera `names` are the layout's."""
        where = f"openpi layout {self.name!r} cameras"
        if self.cameras and names != sorted(self.cameras):
            unknown = [name for name in names if name not in self.cameras]
            missing = [name for name in sorted(self.cameras) if name not in names]
            hint = "name the robot's cameras after the layout's"
            if not (unknown and missing):  # a camera too many or too few: no rename fixes it
                raise ContractError(where, sorted(self.cameras), names, f"{hint} with camera_map")
            raise ContractError(
                where,
                sorted(self.cameras),
                names,
                fix=OptionFix("camera_map", ({unknown[0]: missing[0]},), f"{hint}, for example "),
            )

    def to_flat(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A request in this layout, rewritten into the flat form (``observation.images.*``,
        ``observation.state``, ``prompt``); other keys are kept. Raises `CodecError`."""
        flat = {k: v for k, v in request.items() if k != self.prompt_key}
        self._flatten_images(flat)
        self._flatten_state(flat)
        if self.prompt_key in request:
            flat["prompt"] = request[self.prompt_key]
        return flat

    def _flatten_images(self, flat: dict[str, Any]) -> None:
        """Move the layout's camera images in `flat` to their flat keys, channels last."""
        source: Any = flat
        if self.images_field is not None:
            source = flat.pop(self.images_field, None)
            if not isinstance(source, dict):
                raise CodecError(
                    f"openpi layout {self.name!r} needs {self.images_field!r}, a map of camera "
                    "to image"
                )
        for name in self.cameras:
            key = self.image_key.format(camera=name)
            if key not in source:
                raise CodecError(f"openpi layout {self.name!r} needs the image {key!r}")
            value = source.pop(key)
            flat[FLAT_IMAGE_PREFIX + name] = _channels_last(value) if self.channels_first else value

    def _flatten_state(self, flat: dict[str, Any]) -> None:
        """Join the layout's state parts in `flat` into the flat state (all of them, or none)."""
        parts = [flat.pop(part.key, None) for part in self.state]
        if any(part is not None for part in parts):
            if any(part is None for part in parts):
                keys = [part.key for part in self.state]
                raise CodecError(f"openpi layout {self.name!r} needs all of the state keys {keys}")
            flat[FLAT_STATE_KEY] = _concatenate(parts)


def _channels_first(value: Any) -> Any:
    return (
        np.ascontiguousarray(np.moveaxis(value, -1, 0)) if isinstance(value, np.ndarray) else value
    )


def _channels_last(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 3 and value.shape[0] in (1, 3, 4):
        return np.moveaxis(value, 0, -1)
    raise CodecError("images of this layout must be 3xHxW arrays (channels first)")


def _concatenate(parts: list[Any]) -> np.ndarray:
    try:
        return np.concatenate([np.asarray(part, dtype=np.float32).reshape(-1) for part in parts])
    except (TypeError, ValueError):
        raise CodecError("state parts must be numeric arrays") from None


EXAMPLE_IMAGE_SIZE = (224, 224)
"""What openpi's DROID, LIBERO and ALOHA example clients resize every frame to."""
FLAT = OpenpiLayout("flat", (), FLAT_IMAGE_PREFIX + "{camera}", (StatePart(FLAT_STATE_KEY, None),))
DROID = OpenpiLayout(
    "droid",
    ("exterior_image_1_left", "wrist_image_left"),
    "observation/{camera}",
    (StatePart("observation/joint_position", 7), StatePart("observation/gripper_position", 1)),
    image_size=EXAMPLE_IMAGE_SIZE,
)
LIBERO = OpenpiLayout(
    "libero",
    ("image", "wrist_image"),
    "observation/{camera}",
    (StatePart("observation/state", 8),),
    image_size=EXAMPLE_IMAGE_SIZE,
)
ALOHA = OpenpiLayout(
    "aloha",
    ("cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist"),
    "{camera}",
    (StatePart("state", 14),),
    images_field="images",
    channels_first=True,
    image_size=EXAMPLE_IMAGE_SIZE,
)
LAYOUTS: dict[str, OpenpiLayout] = {layout.name: layout for layout in (FLAT, DROID, LIBERO, ALOHA)}

LayoutFunction = Callable[[Observation], dict[str, Any]]
"""A layout of one's own: the openpi request dict for an observation."""


def openpi_layout(layout: str | OpenpiLayout) -> OpenpiLayout:
    """The layout named `layout` (or `layout` itself); `ValueError` naming the built-ins."""
    if isinstance(layout, OpenpiLayout):
        return layout
    if layout not in LAYOUTS:
        check_choice("openpi layout", layout, LAYOUTS)
    return LAYOUTS[layout]
