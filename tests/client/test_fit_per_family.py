"""`ActionClient.fit` shows the frames `infer` sends, on every server family: fitted to what
that family's server announces (GR00T's modality config, vLLM-Omni's `PolicyServerConfig`),
against real servers on 127.0.0.1 (tests/gr00t_server.py, tests/vllm_omni_server.py).

Before the clients drove one session per family, `fit` read the action API's metadata whatever
the server: on GR00T's ZeroMQ transport that was an `AttributeError`, and on vLLM-Omni's
endpoint its config was read as the action API's metadata, so `fit` left the frames at their
size while `infer` resized them to the announced resolution.
"""

from __future__ import annotations

import numpy as np
import pytest
from openpi_client import msgpack_numpy

from gr00t_server import Gr00tServer, from_bytes
from vla_client import ActionClient, Observation
from vllm_omni_server import OmniServer, keyed_actions


def observation() -> Observation:
    rng = np.random.default_rng(5)
    names = ("front", "wrist")
    frames = {name: rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for name in names}
    return Observation(frames, state=np.arange(7, dtype=np.float64) / 8, task="stack the cups")


def test_gr00t_fit_is_what_infer_sends() -> None:
    pytest.importorskip("zmq")
    obs = observation()
    with (
        Gr00tServer() as server,
        ActionClient(server.url, state_split={"arm": 6, "gripper": 1}, image_size=(16, 16)) as c,
    ):
        fitted = c.fit(obs)
        c.infer(obs)
    video = from_bytes(server.frames[-1])["data"]["observation"]["video"]
    assert {name: frame.shape for name, frame in fitted.images.items()} == {
        "front": (16, 16, 3), "wrist": (16, 16, 3)
    }  # fmt: skip
    for name, frame in fitted.images.items():
        assert video[name][0, 0].tobytes() == frame.tobytes()


def test_vllm_omni_fit_is_resized_to_the_announced_resolution_as_infer_sends() -> None:
    keys = {"joint_position": 7}
    config = {"action_horizon": 4, "action_keys": list(keys), "image_resolution": [12, 16]}
    obs = observation()
    with OmniServer(config, keyed_actions(keys, 4)) as server, ActionClient(server.url) as c:
        fitted = c.fit(obs)
        c.infer(obs)
    sent = msgpack_numpy.unpackb(server.frames[-1])["images"]
    assert [frame.shape for frame in fitted.images.values()] == [(12, 16, 3), (12, 16, 3)]
    assert [frame.tobytes() for frame in sent] == [f.tobytes() for f in fitted.images.values()]
