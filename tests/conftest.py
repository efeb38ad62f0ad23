"""Fixtures shared across the suite: camera-like frames and a real reference server."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import settings

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation

# No time limit on a property test's examples (Hypothesis's default is 200 ms each): speed is
# measured in benchmarks/, and on a shared 2-core machine a slow example is load, not a bug.
# A test that hangs is ended by pytest-timeout. The suite's examples are the same every run, so
# that CI passes or fails on the code alone; `VLA_HYPOTHESIS=explore` draws new ones each run
# (docs/testing.md, "Property tests"), which is how the fuzz tests find what they find. Both
# profiles name `derandomize`: under CI (the `CI` variable set) Hypothesis's default profile is
# its "ci" one, which derandomizes, and a profile inherits from the default it is registered on.
settings.register_profile("suite", deadline=None, derandomize=True)
settings.register_profile("explore", deadline=None, derandomize=False)
settings.load_profile(os.environ.get("VLA_HYPOTHESIS", "suite"))


@pytest.fixture(scope="session")
def frames() -> dict[str, np.ndarray]:
    """Three camera-like 120x160 RGB frames (small, so tests stay fast)."""
    return synthetic_frames(3, 120, 160, seed=7)


@pytest.fixture(scope="session")
def camera_frames() -> dict[str, np.ndarray]:
    """Three full-size 360x640 frames, for checks that depend on image scale (JPEG PSNR)."""
    return synthetic_frames(3, 360, 640, seed=11)


@pytest.fixture(scope="session")
def observation(frames: dict[str, np.ndarray]) -> Observation:
    return Observation(frames, state=np.linspace(-1, 1, 7), task="stack the blocks")


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """A reference server (uvicorn, in-process thread) on a free loopback port."""
    from vla_client.protocol import DecodeLimits
    from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

    config = ServerConfig(
        max_body_bytes=16 * 1024 * 1024,
        limits=DecodeLimits(max_cameras=4, max_image_pixels=1024 * 1024),
    )
    with LocalServer(
        create_app(ReferencePolicy(action_horizon=10, action_dim=7), config)
    ) as server:
        yield server.url
