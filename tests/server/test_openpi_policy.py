"""`OpenpiPolicy` in this process: what it announces, what it hands an openpi-style object, what
it makes of the reply, and its life cycle (a factory run once, in `load`; `reset`; `close`;
what travels to the worker). The served path, through the worker, is in test_protocols.py and
test_openpi_layouts.py."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from vla_client.protocol.layouts import DROID, LIBERO
from vla_client.server.policies import OpenpiPolicy
from vla_client.server.policy import PolicyInput


class Recording:
    """An openpi-style policy: ``infer(obs) -> {"actions": ...}``, keeping what it was sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.actions = np.arange(40, dtype=np.float64).reshape(10, 4)
        self.resets = 0

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(obs)
        return {"actions": self.actions}

    def reset(self) -> None:
        self.resets += 1


def droid_input(**changes: Any) -> PolicyInput:
    images = {name: np.full((4, 6, 3), i, np.uint8) for i, name in enumerate(DROID.cameras)}
    return PolicyInput(images=images, state=np.arange(8, dtype=np.float32), task="pick",
                       **changes)  # fmt: skip


def test_the_spec_follows_the_layout_unless_told_otherwise() -> None:
    spec = OpenpiPolicy(Recording(), action_horizon=10, action_dim=4).spec
    assert (spec.family, spec.action_horizon, spec.action_dim) == ("openpi", 10, 4)
    assert spec.camera_names == DROID.cameras and spec.state_dim == 8
    assert spec.image_size is None
    told = OpenpiPolicy(
        Recording(), layout="libero", action_horizon=5, action_dim=7, camera_names=("front",),
        state_dim=3, image_size=(96, 128),
    ).spec  # fmt: skip
    assert (told.camera_names, told.state_dim, told.image_size) == (("front",), 3, (96, 128))
    assert OpenpiPolicy(Recording(), layout=LIBERO, action_horizon=5, action_dim=7).spec == (
        OpenpiPolicy(Recording(), layout="libero", action_horizon=5, action_dim=7).spec
    )


def test_the_request_is_the_layouts_and_the_reply_is_float32_cut_to_the_horizon_asked() -> None:
    policy = Recording()
    adapter = OpenpiPolicy(policy, action_horizon=10, action_dim=4)
    observation = droid_input()
    full = adapter.infer(observation)
    assert full.dtype == np.float32 and full.shape == (10, 4)
    np.testing.assert_array_equal(full, policy.actions.astype(np.float32))
    assert policy.sent[0].keys() == DROID.request(observation.images, observation.state,
                                                  "pick").keys()  # fmt: skip
    assert policy.sent[0]["prompt"] == "pick"
    np.testing.assert_array_equal(policy.sent[0]["observation/joint_position"], np.arange(7))
    short = adapter.infer(droid_input(action_horizon=3))
    np.testing.assert_array_equal(short, full[:3])


@pytest.mark.parametrize("reply", [None, [], {"action": [[0.0]]}, "actions"])
def test_a_reply_without_actions_is_refused(reply: Any) -> None:
    class Broken(Recording):
        def infer(self, obs: dict[str, Any]) -> Any:
            return reply

    with pytest.raises(ValueError, match=r"^the openpi policy's reply has no 'actions'$"):
        OpenpiPolicy(Broken(), action_horizon=10, action_dim=4).infer(droid_input())


def test_a_factory_runs_once_at_load_and_only_it_travels_to_the_worker() -> None:
    made: list[Recording] = []

    def factory() -> Recording:
        made.append(Recording())
        return made[-1]

    adapter = OpenpiPolicy(factory, action_horizon=10, action_dim=4)
    assert made == [], "nothing is made until the worker loads it"
    adapter.load()
    adapter.load()
    assert len(made) == 1
    adapter.infer(droid_input())
    assert made[0].sent, "the made policy answers"
    assert adapter.__getstate__()["_policy"] is None, "the factory travels, not its work"
    assert adapter._policy is made[0], "while this side keeps it"
    adapter.reset()
    assert made[0].resets == 1
    adapter.close()
    assert adapter._policy is None
    adapter.infer(droid_input())
    assert len(made) == 2, "after close, the next call makes it again"


def test_a_policy_object_travels_as_it_is_and_stays_after_close() -> None:
    policy = Recording()
    adapter = OpenpiPolicy(policy, action_horizon=10, action_dim=4)
    assert pickle.loads(pickle.dumps(adapter))._policy is not None
    adapter.close()
    assert adapter._policy is policy
    adapter.warm_up(droid_input())
    assert len(policy.sent) == 1, "the warm-up is one inference"


def test_a_policy_without_reset_is_left_alone() -> None:
    class NoReset:
        def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
            return {"actions": np.zeros((10, 4))}

    adapter = OpenpiPolicy(NoReset(), action_horizon=10, action_dim=4)
    adapter.reset()  # nothing to call
    assert adapter.infer(droid_input()).shape == (10, 4)


def test_what_is_neither_a_policy_nor_a_factory_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^OpenpiPolicy takes an object with infer\(obs\) or"):
        OpenpiPolicy(42, action_horizon=10, action_dim=4)  # type: ignore[arg-type]
    adapter = OpenpiPolicy(lambda: 42, action_horizon=10, action_dim=4)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^the openpi policy factory returned int$"):
        adapter.load()
