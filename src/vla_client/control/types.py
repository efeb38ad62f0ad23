"""The callable shapes the control package plugs together, so any transport fits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from vla_client.client.result import ActionResult
from vla_client.observation import Observation

Action = npt.NDArray[np.float32]
"""One action vector ``[D]`` (or a chunk ``[H, D]``), float32 like `ActionResult.actions`."""

Observe = Callable[[], Observation]
"""Reads the robot now: cameras, state, task. Called on the control thread."""

ApplyAction = Callable[[Action], None]
"""Sends one action to the robot."""

InferFn = Callable[[Observation], ActionResult]
"""One blocking inference, such as `ActionClient.infer`.

It is expected to check that the reply it returns is for the request it sent (`ActionClient`
raises `MismatchedReplyError` otherwise) and to give each reply a distinct `request_id`.
"""
