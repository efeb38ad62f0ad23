"""A frame a policy cannot read is a 400 that says why (issue 45, item 6).

``vla-client serve --policy reach-flow`` answered every frame but the reach task's with ``500:
policy failed (ValueError); details are in the server log``. A policy refuses an observation by
raising `PolicyInputError`: the request gets 400 with the policy's message, in the worker
layout and in-process alike, over HTTP and websockets; in a batch, only its own request.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from vla_client import ActionClient, Observation
from vla_client.cli import main
from vla_client.errors import ServerError
from vla_client.server import LocalServer, PolicyInputError, ServerConfig, create_app, make_policy
from vla_client.server.policy import Policy, PolicyInput, PolicySpec
from vla_client.server.worker.process import _chunks
from vla_client.tasks.reach import ReachTask

REFUSAL = (
    "the top camera shows no target or robot: this policy reads frames of the built-in reach "
    "task (its magenta target ring and blue robot), as vla-client eval and examples/rtc_reach.py "
    "send them, not other images"
)


@pytest.mark.parametrize("in_process", [False, True], ids=["worker", "in-process"])
@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_send_to_reach_flow_with_other_frames_is_told_why(
    in_process: bool, scheme: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command as a user types it: synthetic frames, not the reach task's."""
    app = create_app(make_policy("reach-flow"), ServerConfig(in_process=in_process))
    with LocalServer(app) as server:
        url = server.url.replace("http://", f"{scheme}://")
        code = main(["send", url])
        err = capsys.readouterr().err
        task = ReachTask()
        with ActionClient(url) as client:  # its own frames are served as before
            result = client.infer(Observation(task.frames(), state=task.state(), task=task.task))
    assert code == 1
    assert err.strip() == f"vla-client: error: server answered 400: {REFUSAL}"
    assert result.actions.shape == (16, 2)


def test_python_callers_get_the_400_and_its_reason() -> None:
    server = LocalServer(create_app(make_policy("reach")))
    with server, ActionClient(server.url) as client:
        black = np.zeros((64, 64, 3), np.uint8)
        with pytest.raises(ServerError) as refused:
            client.infer(Observation({"top": black, "wrist": black}, state=[0.0]))
    assert refused.value.status_code == 400
    assert refused.value.detail == REFUSAL


class PickyPolicy(Policy):
    """Refuses an observation whose task is ``refuse``, in a batch or alone."""

    spec = PolicySpec(family="picky", action_horizon=2, action_dim=1)

    def __init__(self) -> None:
        self.calls: list[int] = []

    def infer_batch(self, observations: Sequence[PolicyInput]) -> list[np.ndarray]:
        self.calls.append(len(observations))
        if any(observation.task == "refuse" for observation in observations):
            raise PolicyInputError("no task called refuse")
        if any(observation.task == "boom" for observation in observations):
            raise RuntimeError("a secret path /home/me/weights")
        return [np.zeros((2, 1), np.float32) for _ in observations]

    def infer(self, observation: PolicyInput) -> np.ndarray:
        return self.infer_batch([observation])[0]


def test_a_refusal_in_a_batch_is_its_own_requests_only() -> None:
    """The worker asks a refused batch again one observation at a time."""
    policy = PickyPolicy()
    frame = {"camera": np.zeros((4, 4, 3), np.uint8)}
    inputs = [PolicyInput(frame, task=task) for task in ("a", "refuse", "b")]
    chunks = _chunks(policy, inputs)
    assert [type(chunk).__name__ for chunk in chunks] == ["ndarray", "PolicyInputError", "ndarray"]
    assert str(chunks[1]) == "no task called refuse"
    assert policy.calls == [3, 1, 1, 1]


@pytest.mark.parametrize("in_process", [False, True], ids=["worker", "in-process"])
def test_a_policy_error_of_another_kind_stays_a_500(in_process: bool) -> None:
    """Only the typed refusal is the client's to read: any other exception is the policy's
    failure, a 500 (its message may hold what a client must not see)."""
    policy = PickyPolicy()
    app = create_app(policy, ServerConfig(in_process=in_process))
    with LocalServer(app) as server, ActionClient(server.url) as client:
        frame = {"camera": np.zeros((4, 4, 3), np.uint8)}
        with pytest.raises(ServerError) as failed:
            client.infer(Observation(frame, task="boom"))
        with pytest.raises(ServerError) as refused:
            client.infer(Observation(frame, task="refuse"))
    assert failed.value.status_code == 500
    assert (refused.value.status_code, refused.value.detail) == (400, "no task called refuse")
