"""What openpi's example clients send, written out by hand from openpi's ``examples/``, to
compare vla-client's openpi requests with."""

from __future__ import annotations

from typing import Any

import numpy as np

from vla_client import Observation


def openpi_example_request(observation: Observation, layout: str) -> dict[str, Any]:
    """The dict openpi's example client for `layout` sends, built the way the example builds it."""
    images, state, prompt = observation.images, observation.state, observation.task
    assert state is not None
    if layout == "droid":  # examples/droid/main.py
        return {
            "observation/exterior_image_1_left": images["exterior_image_1_left"],
            "observation/wrist_image_left": images["wrist_image_left"],
            "observation/joint_position": state[:7],
            "observation/gripper_position": state[7:8],
            "prompt": prompt,
        }
    if layout == "libero":  # examples/libero/main.py
        return {
            "observation/image": images["image"],
            "observation/wrist_image": images["wrist_image"],
            "observation/state": state,
            "prompt": prompt,
        }
    if layout == "aloha":  # examples/aloha_real: images are [C, H, W]
        return {
            "images": {name: np.transpose(frame, (2, 0, 1)) for name, frame in images.items()},
            "state": state,
            "prompt": prompt,
        }
    flat = {f"observation.images.{name}": frame for name, frame in images.items()}
    return {**flat, "observation.state": state, "prompt": prompt}
