"""``vla-client serve`` with policies of one's own and the contract options, as an operator runs
it: a real process, real clients (vla-client's and openpi's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from serve_process import start_serve, wait_until_healthy

import vla_client
from oracles import oracle_actions
from vla_client import ActionClient, ContractError, Observation, ServerError
from vla_client.cli import main
from vla_client.server.policy import PolicyInput

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test

HERE = Path(__file__).resolve().parent
SOURCE = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """my_policies on the PYTHONPATH of the servers these tests start."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    server.wait(30)


def _served_actions(*args: str) -> np.ndarray:
    """The actions ``vla-client serve ARGS`` answers to one small frame."""
    port = load_test.free_port()
    server = start_serve(port, *args)
    try:
        with ActionClient(f"http://127.0.0.1:{port}") as client:
            return client.infer(Observation({"cam": np.zeros((8, 8, 3), np.uint8)})).actions
    finally:
        _stop(server)


@pytest.mark.usefixtures("importable")
def test_serve_an_import_path_with_options() -> None:
    actions = _served_actions(
        "--policy", "my_policies:make_constant", "--policy-option", "horizon=8",
        "--policy-option", "value=0.375",
    )  # fmt: skip
    np.testing.assert_array_equal(actions, np.full((8, 3), 0.375, np.float32))


def test_a_plugin_is_listed_and_served(
    plugin: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = os.pathsep.join([str(plugin), str(HERE), str(SOURCE)])
    monkeypatch.setenv("PYTHONPATH", path)
    listed = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "serve", "--list-policies"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr  # a broken plugin does not fail the listing
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert re.fullmatch(r"acme\s+acme_policies:make\s+Acme's arm policy\.", rows["acme"])
    assert re.search(
        r"broken\s+acme_policies\.nope:make\s+error: ModuleNotFoundError", rows["broken"]
    )
    assert "Deterministic actions computed from the request" in rows["reference"]
    config = tmp_path / "acme.toml"
    config.write_text("value = 0.625\n")
    actions = _served_actions("--policy", "acme", "--policy-config", str(config))
    np.testing.assert_array_equal(actions, np.full((5, 3), 0.625, np.float32))


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["serve", "--port", str(load_test.free_port()), *args])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.startswith("vla-client: error: ") and captured.err.count("\n") == 1, (
        captured.err
    )
    return captured.err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--policy", "no_such_module:Thing"), "cannot import 'no_such_module'"),
        (("--policy", "my_policies:Missing"), "has no attribute 'Missing'"),
        (("--policy", "my_policies:NUMBER"), "is int, not a Policy"),
        (("--policy", "my_policies:broken_factory"), "raised RuntimeError: no checkpoint here"),
        (
            ("--policy", "my_policies:make_constant", "--policy-option", "speed=2"),
            "takes no option 'speed'; it takes horizon, value",
        ),
        (("--policy", "my_policies:make_constant", "--policy-option", "horizon"), "KEY=VALUE"),
        (
            ("--policy", "my_policies:make_constant", "--policy-option", "horizon=abc"),
            "--policy-option horizon=abc: the policy would announce output.action_horizon must "
            "be a whole number, got 'abc'",
        ),
        (("--policy-option", "action_dim=0"), "--policy-option action_dim=0: .*outside 1"),
        (
            ("--policy", "my_policies:make_constant", "--cameras", "a"),
            r"--cameras does not apply to --policy my_policies:make_constant \(only reference, ",
        ),
        (
            ("--policy", "my_policies:Lifecycle"),
            "--policy my_policies:Lifecycle needs --policy-option log=VALUE",
        ),
        (("--policy", "bogus"), "unknown policy 'bogus'; choose one of reference, replay, torch"),
        (("--policy-config", "/no/such.toml"), "cannot read policy options /no/such.toml"),
        (
            ("--action-horizon", "4", "--policy-option", "action_horizon=5"),
            "--action-horizon and the policy options both set 'action_horizon'",
        ),
        (("--image-size", "224"), "--image-size takes HEIGHTxWIDTH, e.g. 224x224, got '224'"),
        (("--image-size", "4x4"), r"--image-size sides must be in 8\.\.8192"),
        (("--require-image-size",), "--require-image-size needs --image-size"),
        (("--state-dim", "0"), r"--state-dim must be in 1\.\.10000, got 0"),
        (("--camera-alias", "wrist"), "--camera-alias takes ALIAS=NAME, got 'wrist'"),
        (("--cameras", "a,b", "--camera-alias", "w=c"), "'c' is not one of --cameras"),
        (("--cameras", "a,b", "--camera-alias", "a=b"), "'a' is a camera name itself"),
        (("--camera-alias", "w=a", "--camera-alias", "w=b"), "gives 'w' twice"),
        (("--depth-camera", "d"), r"--depth-camera takes NAME=uint16\|float32, got 'd'"),
        (("--depth-camera", "d=float64"), r"--depth-camera takes NAME=uint16\|float32, got "),
        (("--depth-camera", "d=uint16", "--depth-camera", "d=float32"), "gives 'd' twice"),
        (("--cameras", "d", "--depth-camera", "d=uint16"), "'d' is one of --cameras \\(colour\\)"),
        (
            ("--policy", "reach", "--depth-camera", "d=uint16"),
            r"--depth-camera does not apply to --policy reach \(only reference takes it\)",
        ),
        (("--openpi-layout", "bridge"), "--openpi-layout must be one of flat, droid, libero, "),
        (("--record-max-files", "3"), "--record-max-files needs --record DIR"),
        (("--record", "r", "--record-max-mb", "0"), "--record-max-mb must allow 4 KiB per file"),
        (
            ("--policy", "replay", "--replay-file", "x.npz", "--state-dim", "3"),
            r"--state-dim does not apply to --policy replay \(only reference, torch take it\)",
        ),
    ],
)
@pytest.mark.usefixtures("importable")
def test_every_policy_error_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], said: str
) -> None:
    assert re.search(said, refused(capsys, *args))


@pytest.mark.parametrize("fail", ["load", "warm_up"])
@pytest.mark.usefixtures("importable")
def test_a_policy_that_fails_to_start_is_one_line_exit_1(tmp_path: Path, fail: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(load_test.free_port()),
         "--policy", "my_policies:Lifecycle", "--policy-option", f"log={tmp_path / 'log'}",
         "--policy-option", f"fail={fail}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr
    step = "load: FileNotFoundError" if fail == "load" else "warm up: RuntimeError: CUDA out of"
    assert completed.stderr.startswith(f"vla-client: error: policy failed to {step}"), (
        completed.stderr
    )
    assert completed.stderr.count("\n") == 1, completed.stderr


@pytest.fixture
def droid_server() -> Iterator[int]:
    """The reference server set up as docs/real-servers.md says, for DROID."""
    port = load_test.free_port()
    server = start_serve(
        port, "--openpi-layout", "droid", "--cameras", "exterior_image_1_left,wrist_image_left",
        "--state-dim", "8", "--action-horizon", "10", "--action-dim", "8",
    )  # fmt: skip
    yield port
    _stop(server)


@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning")
def test_the_documented_droid_server_answers_droid_clients(droid_server: int) -> None:
    websocket_client_policy = pytest.importorskip("openpi_client.websocket_client_policy")
    frames = {
        "exterior": np.zeros((224, 224, 3), np.uint8),
        "wrist": np.ones((224, 224, 3), np.uint8),
    }
    camera_map = {"exterior": "exterior_image_1_left", "wrist": "wrist_image_left"}
    observation = Observation(frames, state=np.zeros(8), task="open the drawer")
    url = f"ws://127.0.0.1:{droid_server}/openpi/policy"
    with ActionClient(url, layout="droid", camera_map=camera_map) as client:
        ours = client.infer(observation).actions
        assert ours.shape == (10, 8)
        with pytest.raises(ContractError, match="state"):  # the announced state_dim is checked
            client.infer(Observation(frames, state=np.zeros(7)))
    theirs = websocket_client_policy.WebsocketClientPolicy("127.0.0.1", droid_server)
    reply = theirs.infer({
        "observation/exterior_image_1_left": frames["exterior"],
        "observation/wrist_image_left": frames["wrist"],
        "observation/joint_position": np.zeros(7), "observation/gripper_position": np.zeros(1),
        "prompt": "open the drawer",
    })  # fmt: skip
    np.testing.assert_array_equal(reply["actions"], ours)


def test_the_contract_options_are_announced_and_enforced() -> None:
    port = load_test.free_port()
    server = start_serve(
        port, "--cameras", "base_0_rgb,left_wrist_0_rgb",
        "--camera-alias", "wrist=left_wrist_0_rgb", "--image-size", "32x48",
        "--require-image-size", "--state-dim", "3",
    )  # fmt: skip
    try:
        with ActionClient(f"http://127.0.0.1:{port}", resize="none") as client:
            announced = client.metadata().input
            assert list(announced.image_keys) == ["base_0_rgb", "left_wrist_0_rgb"]
            assert list(announced.image_size or ()) == [32, 48] and announced.image_size_required
            assert announced.camera_aliases == {"wrist": "left_wrist_0_rgb"}
            assert announced.state_dim == 3
            frame = np.zeros((32, 48, 3), np.uint8)
            observation = Observation({"base_0_rgb": frame, "wrist": frame}, state=np.zeros(3))
            assert client.infer(observation).actions.shape == (16, 7)
            with pytest.raises(ContractError, match="image"):
                client.infer(Observation({"base_0_rgb": frame, "wrist": frame[:16]}, state=[0] * 3))
    finally:
        _stop(server)


def test_a_depth_camera_is_served_to_the_reference_policy() -> None:
    """``serve --depth-camera``: announced, taken in its dtype by the reference policy in the
    worker, whose actions report the depth's mean, least and greatest distance (the oracle)."""
    port = load_test.free_port()
    server = start_serve(port, "--depth-camera", "mm=uint16", "--depth-camera", "m=float32")
    millimetres = np.array([[0, 1200], [2500, 65535]], np.uint16)
    metres = np.array([[np.nan, 0.75], [np.inf, 3.5]], np.float32)
    try:
        with ActionClient(f"http://127.0.0.1:{port}", encoding="raw", wire="msgpack") as client:
            assert client.metadata().input.depth_cameras == {"mm": "uint16", "m": "float32"}
            observation = Observation(
                {"front": np.full((2, 2, 3), 90, np.uint8)},
                depth={"mm": millimetres, "m": metres},
            )
            actions = client.infer(observation).actions
    finally:
        _stop(server)
    seen = PolicyInput({**observation.images, **observation.depth})
    np.testing.assert_allclose(
        actions, oracle_actions(seen, horizon=16, action_dim=7), rtol=1e-5, atol=1e-6
    )


OWN_MODULE = '''
import numpy as np
from vla_client.server import Policy, PolicySpec


class InferRaises(Policy):
    """Answers 'fine' tasks; raises on any other."""

    @property
    def spec(self):
        return PolicySpec(family="mine", action_horizon=2, action_dim=2)

    def infer(self, observation):
        if observation.task != "fine":
            raise ValueError(f"cannot do {observation.task!r}")
        return np.ones((2, 2), np.float32)
'''


def test_a_policy_module_in_the_working_directory_serves_and_logs_its_traceback(
    tmp_path: Path,
) -> None:
    """``vla-client serve --policy mymod:InferRaises`` run in the module's folder, with nothing
    on PYTHONPATH but vla_client itself and ``-P`` (no script directory on sys.path): the entry
    point and the worker import ./mymod.py, and each distinct failure's traceback is in stderr
    once, with the policy's file, line and the request id."""
    (tmp_path / "mymod.py").write_text(OWN_MODULE)
    raise_line = (
        OWN_MODULE.splitlines().index(
            '            raise ValueError(f"cannot do {observation.task!r}")'
        )
        + 1
    )
    port = load_test.free_port()
    source = str(Path(vla_client.__file__).resolve().parents[1])
    server = subprocess.Popen(
        [sys.executable, "-P", "-m", "vla_client.cli", "serve", "--port", str(port),
         "--policy", "mymod:InferRaises"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": source},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(port, server)
        with ActionClient(url, timeout_s=60) as client:
            frame = {"cam": np.zeros((8, 8, 3), np.uint8)}
            ok = client.infer(Observation(frame, task="fine"))
            np.testing.assert_array_equal(ok.actions, np.ones((2, 2), np.float32))
            for n in range(50):
                with pytest.raises(ServerError, match=r"policy failed \(ValueError\)"):
                    client.infer(Observation(frame, task=f"job {n}"), request_id=f"req-own-{n}")
    finally:
        server.terminate()
        stderr = server.communicate(timeout=30)[1].decode()
    assert stderr.count("Traceback (most recent call last)") == 1, stderr
    assert f'{tmp_path / "mymod.py"}", line {raise_line}, in infer' in stderr, stderr
    assert "(request req-own-0)" in stderr
    assert "ValueError: cannot do 'job 0'" in stderr
