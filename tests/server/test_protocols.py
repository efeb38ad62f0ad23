"""``serve --protocol``: the bundled server speaks GR00T's, vLLM-Omni's and RoboArena's
protocols, to each ecosystem's own client and to vla-client's, for a policy served here.

Every server runs in the default layout (a worker process behind the entrypoint), so each
family's request takes the server's one pipeline. The policy is tests/digest_policy.py's: its
actions are the SHA-256 of the frames it received, so a chunk equal to `sha256_rows` of the
test's own frames proves every frame arrived bit for bit, through the family's messages and the
pipeline, and was answered for that observation.

The ecosystems' clients: GR00T's ``PolicyClient`` as tests/gr00t_policy_client.py mirrors it
(its package is not installable); openpi-client's ``WebsocketClientPolicy`` (installed) against
vLLM-Omni's route, as vLLM-Omni's docs drive it; and against RoboArena's route as RoboArena's
own client is: its ``roboarena/policy_client.py`` is openpi's ``WebsocketClientPolicy``
copied (``ws://host:port``, the config first, msgpack out, a text frame raised), and its
evaluator names the ``endpoint`` of each request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from digest_policy import DigestPolicy, sha256_rows
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.errors import ServerErrorFrame
from vla_client.recording import load_observations
from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.config import ProtocolSettings, RecordSettings
from vla_client.server.policy import PolicyInput, PolicySpec

zmq = pytest.importorskip("zmq")
websocket_client_policy = pytest.importorskip("openpi_client.websocket_client_policy")
from openpi_client import msgpack_numpy  # noqa: E402

from gr00t_policy_client import PolicyClient  # noqa: E402  (needs pyzmq)

TASK = "pick up the red cube"
LANGUAGE = "annotation.human.task_description"
STATE_SPLIT = {"arm": 6, "gripper": 1}


def frames(names: tuple[str, ...], seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for name in names}


def served(policy: Any, protocol: ProtocolSettings, **settings: Any) -> LocalServer:
    return LocalServer(create_app(policy, ServerConfig(protocol=protocol, **settings)))


def run_async(client: AsyncActionClient, observation: Observation) -> np.ndarray:
    async def run() -> np.ndarray:
        async with client:
            await client.reset()
            return (await client.infer(observation)).actions

    return asyncio.run(run())


# GR00T ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gr00t() -> Iterator[tuple[LocalServer, int]]:
    policy = DigestPolicy(camera_names=("front", "wrist"), state_dim=7)
    settings = ProtocolSettings("gr00t", port=0, state_split=STATE_SPLIT)
    with served(policy, settings) as server:
        port = int(server.app.state.protocol_url.rsplit(":", 1)[1])
        yield server, port


def gr00t_observation(images: dict[str, np.ndarray], state: np.ndarray) -> dict[str, Any]:
    """The nested observation GR00T's clients send: batch 1, one time step."""
    return {
        "video": {name: frame[None, None] for name, frame in images.items()},
        "state": {
            "arm": state[None, None, :6].astype(np.float32),
            "gripper": state[None, None, 6:].astype(np.float32),
        },
        "language": {LANGUAGE: [[TASK]]},
    }


def test_gr00t_policy_client_drives_a_policy_served_here(gr00t: tuple[LocalServer, int]) -> None:
    client = PolicyClient(host="127.0.0.1", port=gr00t[1])
    try:
        assert client.ping()
        config = client.get_modality_config()
        assert {name: block["__ModalityConfig_class__"] for name, block in config.items()} == {
            "video": True, "state": True, "action": True, "language": True,
        }  # fmt: skip
        fields = {name: block["as_json"] for name, block in config.items()}
        assert fields["video"]["modality_keys"] == ["front", "wrist"]
        assert fields["state"]["modality_keys"] == ["arm", "gripper"]
        assert fields["action"]["modality_keys"] == ["action"]
        assert fields["action"]["delta_indices"] == [0, 1]  # the digest policy's horizon
        assert fields["language"]["modality_keys"] == [LANGUAGE]
        assert client.reset() == {}
        images, state = frames(("front", "wrist")), np.arange(7) / 8
        actions, info = client.get_action(gr00t_observation(images, state))
        assert info == {}
        assert list(actions) == ["action"]
        assert actions["action"].dtype == np.float32 and actions["action"].shape == (1, 2, 33)
        np.testing.assert_array_equal(actions["action"][0], sha256_rows(images, state))
    finally:
        client.close()


def test_gr00t_failures_are_its_error_answers(gr00t: tuple[LocalServer, int]) -> None:
    """What GR00T's server answers a request it cannot serve, raised by GR00T's client."""
    client = PolicyClient(host="127.0.0.1", port=gr00t[1])
    images, state = frames(("front", "wrist")), np.arange(7) / 8
    try:
        missing = gr00t_observation({"front": images["front"]}, state)
        with pytest.raises(RuntimeError, match=r"missing \['wrist'\]"):
            client.get_action(missing)
        batch = gr00t_observation(images, state)
        batch["video"]["front"] = np.concatenate([batch["video"]["front"]] * 2)
        with pytest.raises(RuntimeError, match=r"one observation of one time step"):
            client.get_action(batch)
        rtc = {"rtc_overlap_steps": 1, "rtc_frozen_steps": 0, "rtc_ramp_rate": 1.0}
        with pytest.raises(RuntimeError, match="no real-time chunking"):
            client.get_action(gr00t_observation(images, state), rtc)
        with pytest.raises(RuntimeError, match="Unknown endpoint: teleport"):
            client.call_endpoint("teleport", requires_input=False)
        with pytest.raises(RuntimeError, match="kill is not served"):
            client.call_endpoint("kill", requires_input=False)
        assert client.ping()  # still serving
    finally:
        client.close()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_our_clients_on_gr00t_get_the_chunk_of_their_frames(
    gr00t: tuple[LocalServer, int], kind: str
) -> None:
    url = gr00t[0].app.state.protocol_url
    observation = Observation(frames(("front", "wrist"), 11), state=np.arange(7) / 4, task=TASK)
    if kind == "sync":
        with ActionClient(url, state_split=STATE_SPLIT) as client:
            assert client.metadata().model_dump()["gr00t"]["state_keys"] == ["arm", "gripper"]
            client.reset()
            result = client.infer(observation)
        actions = result.actions
        assert result.action_keys == {"action": slice(0, 33)}
    else:
        actions = run_async(AsyncActionClient(url, state_split=STATE_SPLIT), observation)
    np.testing.assert_array_equal(actions, sha256_rows(observation.images, observation.state))


def test_gr00t_with_a_key_refuses_another_token() -> None:
    settings = ProtocolSettings("gr00t", port=0, action_split={"first": 3, "rest": 30})
    policy = DigestPolicy(camera_names=("front",))
    with served(policy, settings, api_key="secret", in_process=True) as server:
        port = int(server.app.state.protocol_url.rsplit(":", 1)[1])
        wrong = PolicyClient(host="127.0.0.1", port=port, api_token="guess")
        right = PolicyClient(host="127.0.0.1", port=port, api_token="secret")
        try:
            with pytest.raises(RuntimeError, match="Unauthorized: Invalid API token"):
                wrong.ping()
            images = frames(("front",))
            observation = {
                "video": {"front": images["front"][None, None]},
                "state": {"state": np.zeros((1, 1, 2), np.float32)},
                "language": {LANGUAGE: [[TASK]]},
            }
            actions, _ = right.get_action(observation)
        finally:
            wrong.close()
            right.close()
    chunk = sha256_rows(images, np.zeros(2))
    assert list(actions) == ["first", "rest"]
    np.testing.assert_array_equal(actions["first"][0], chunk[:, :3])
    np.testing.assert_array_equal(actions["rest"][0], chunk[:, 3:])


# vLLM-Omni --------------------------------------------------------------------------------

OMNI_PATH = "/v1/realtime/robot/openpi"


@pytest.fixture(scope="module")
def omni() -> Iterator[LocalServer]:
    with served(DigestPolicy(), ProtocolSettings("vllm-omni")) as server:
        yield server


def test_openpi_client_drives_vllm_omnis_route(omni: LocalServer) -> None:
    """openpi-client against vLLM-Omni's route, as vLLM-Omni's docs drive it; an error frame
    leaves the connection serving."""
    client = websocket_client_policy.WebsocketClientPolicy(f"ws://127.0.0.1:{omni.port}{OMNI_PATH}")
    assert client.get_server_metadata() == {"action_horizon": 2, "needs_session_id": False}
    images, state = frames(("a", "b")), np.arange(8, dtype=np.float32)
    actions = client.infer({"images": list(images.values()), "state": state, "prompt": TASK})
    named = {"image_0": images["a"], "image_1": images["b"]}
    np.testing.assert_array_equal(actions, sha256_rows(named, state))
    refused = client.infer({"images": "not frames", "prompt": TASK})
    assert refused["type"] == "error" and "images must be a list" in refused["message"]
    assert client.infer({"endpoint": "reset"}) == {"status": "reset successful"}
    again = client.infer({"images": list(images.values()), "state": state, "prompt": TASK})
    np.testing.assert_array_equal(again, actions)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_our_clients_on_vllm_omni_get_the_chunk_of_their_frames(
    omni: LocalServer, kind: str
) -> None:
    url = f"ws://127.0.0.1:{omni.port}{OMNI_PATH}"
    observation = Observation(frames(("x", "y"), 3), state=np.arange(5) / 2, task=TASK)
    if kind == "sync":
        with ActionClient(url) as client:
            client.reset()
            actions = client.infer(observation).actions
    else:
        actions = run_async(AsyncActionClient(url), observation)
    named = dict(zip(("image_0", "image_1"), observation.images.values(), strict=True))
    np.testing.assert_array_equal(actions, sha256_rows(named, observation.state))


def test_vllm_omni_per_key_actions_and_a_refusal_as_its_error_frame() -> None:
    policy = DigestPolicy(camera_names=("exterior", "wrist"))
    settings = ProtocolSettings("vllm-omni", action_split={"digest": 32, "state": 1})
    with served(policy, settings, in_process=True) as server:
        url = f"ws://127.0.0.1:{server.port}{OMNI_PATH}"
        observation = Observation(frames(("exterior", "wrist")), state=np.ones(3), task=TASK)
        with ActionClient(url) as client:
            assert client.metadata().model_dump()["vllm_omni"]["action_keys"] == ["digest", "state"]
            result = client.infer(observation)
            with pytest.raises(ServerErrorFrame, match=r"takes 2 frames"):
                client.infer(Observation(frames(("exterior",)), task=TASK))
    assert result.action_keys == {"digest": slice(0, 32), "state": slice(32, 33)}
    np.testing.assert_array_equal(result.actions, sha256_rows(observation.images, np.ones(3)))


# RoboArena --------------------------------------------------------------------------------


class ArenaDigest(DigestPolicy):
    """The digest in RoboArena's (N, 8) actions: each camera's 32 hash bytes as 4 rows of 8,
    cameras in name order, then a row of the state."""

    def __init__(self) -> None:
        super().__init__(("exterior_image_1_left", "wrist_image_left"), state_dim=8)
        self._spec = PolicySpec(
            family="arena-digest", action_horizon=9, action_dim=8,
            camera_names=self._spec.camera_names, state_dim=8,
        )  # fmt: skip

    def infer(self, observation: PolicyInput) -> np.ndarray:
        return arena_rows(observation.images, observation.state)


def arena_rows(images: dict[str, np.ndarray], state: Any) -> np.ndarray:
    digest = sha256_rows(images, None)[:, :32].reshape(-1, 8)
    return np.concatenate([digest, np.asarray(state, np.float32).reshape(1, 8)])


@pytest.fixture(scope="module")
def arena() -> Iterator[LocalServer]:
    with served(ArenaDigest(), ProtocolSettings("roboarena")) as server:
        yield server


def evaluator_request(images: dict[str, np.ndarray], state: np.ndarray) -> dict[str, Any]:
    """An observation as RoboArena's evaluator sends it."""
    return {
        "observation/exterior_image_1_left": images["exterior_image_1_left"],
        "observation/wrist_image_left": images["wrist_image_left"],
        "observation/joint_position": state[:7],
        "observation/gripper_position": state[7:],
        "prompt": TASK,
        "endpoint": "infer",
    }


def test_roboarenas_client_drives_a_policy_served_here(arena: LocalServer) -> None:
    client = websocket_client_policy.WebsocketClientPolicy("127.0.0.1", arena.port)
    assert client.get_server_metadata() == {
        "image_resolution": None, "needs_wrist_camera": True, "n_external_cameras": 1,
        "needs_stereo_camera": False, "needs_session_id": False,
        "action_space": "joint_position",
    }  # fmt: skip
    images = frames(("exterior_image_1_left", "wrist_image_left"))
    state = np.arange(8, dtype=np.float64) / 8
    actions = client.infer(evaluator_request(images, state))
    np.testing.assert_array_equal(actions, arena_rows(images, state))
    unnamed = evaluator_request(images, state)
    del unnamed["endpoint"]  # as RoboArena's client sent before its evaluator named one
    np.testing.assert_array_equal(client.infer(unnamed), actions)
    broken = evaluator_request(images, state)
    del broken["observation/wrist_image_left"]
    with pytest.raises(RuntimeError, match=r"Error in inference server:\n.*wrist_image_left"):
        client.infer(broken)


def test_roboarenas_reset_is_its_text_answer(arena: LocalServer) -> None:
    with connect(f"ws://127.0.0.1:{arena.port}", compression=None) as ws:
        msgpack_numpy.unpackb(ws.recv())
        ws.send(msgpack_numpy.packb({"endpoint": "reset"}))
        assert ws.recv() == "reset successful"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_our_clients_on_roboarena_get_the_chunk_of_their_frames(
    arena: LocalServer, kind: str
) -> None:
    url = f"ws://127.0.0.1:{arena.port}"
    cameras = {"left": "exterior_image_1_left", "wrist": "wrist_image_left"}
    observation = Observation(frames(("left", "wrist"), 5), state=np.arange(8) / 3, task=TASK)
    options: dict[str, Any] = {"endpoint": "roboarena", "camera_map": cameras}
    if kind == "sync":
        with ActionClient(url, **options) as client:
            client.reset()
            actions = client.infer(observation).actions
    else:
        actions = run_async(AsyncActionClient(url, **options), observation)
    named = {cameras[name]: frame for name, frame in observation.images.items()}
    np.testing.assert_array_equal(actions, arena_rows(named, observation.state))


# What every request gets, a family's too -------------------------------------------------


class GatedLoad(DigestPolicy):
    """`DigestPolicy`, whose `load` waits for the file `gate` to exist (ten seconds at most)."""

    def __init__(self, gate: Path) -> None:
        super().__init__(camera_names=("front",))
        self.gate = gate

    def load(self) -> None:
        deadline = time.monotonic() + 10
        while not self.gate.exists() and time.monotonic() < deadline:
            time.sleep(0.01)


def test_gr00t_pings_while_the_policy_loads_and_refuses_actions_until_it_is_ready(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "loaded"
    app = create_app(
        GatedLoad(gate), ServerConfig(in_process=True, protocol=ProtocolSettings("gr00t", port=0))
    )
    server = LocalServer(app).start(wait_ready=False)
    port = int(app.state.protocol_url.rsplit(":", 1)[1])
    client = PolicyClient(host="127.0.0.1", port=port)
    images = frames(("front",))
    observation = {
        "video": {"front": images["front"][None, None]},
        "state": {"state": np.zeros((1, 1, 1), np.float32)},
        "language": {LANGUAGE: [[TASK]]},
    }
    try:
        assert client.ping()
        with pytest.raises(RuntimeError, match="the policy is loading"):
            client.get_action(observation)
        gate.touch()
        deadline = time.monotonic() + 15
        while app.state.pipeline.startup.state == "loading" and time.monotonic() < deadline:
            time.sleep(0.01)
        actions, _ = client.get_action(observation)
    finally:
        client.close()
        server.stop()
    np.testing.assert_array_equal(actions["action"][0], sha256_rows(images, np.zeros(1)))


def test_a_familys_requests_are_recorded_and_counted(tmp_path: Path) -> None:
    """--record and /metrics see a family's requests as they see any other."""
    settings = ServerConfig(
        in_process=True,
        protocol=ProtocolSettings("vllm-omni"),
        record=RecordSettings(str(tmp_path / "record")),
    )
    observation = Observation(frames(("front", "wrist")), state=np.arange(3) / 3, task=TASK)
    with LocalServer(create_app(DigestPolicy(), settings)) as server:
        with ActionClient(f"ws://127.0.0.1:{server.port}{OMNI_PATH}") as client:
            actions = client.infer(observation).actions
        metrics = httpx.get(f"{server.url}/metrics").text
    assert f'route="{OMNI_PATH}",status="200"' in metrics
    (recording,) = (tmp_path / "record").iterdir()
    (step,) = load_observations(recording)
    named = dict(zip(("image_0", "image_1"), observation.images.values(), strict=True))
    assert step.observation.images.keys() == named.keys()
    for name, frame in named.items():
        np.testing.assert_array_equal(step.observation.images[name], frame)
    assert step.observation.task == TASK
    np.testing.assert_array_equal(actions, sha256_rows(named, observation.state))


def test_gr00ts_requests_are_counted_under_its_name() -> None:
    settings = ServerConfig(in_process=True, protocol=ProtocolSettings("gr00t", port=0))
    with LocalServer(create_app(DigestPolicy(camera_names=("front",)), settings)) as server:
        port = int(server.app.state.protocol_url.rsplit(":", 1)[1])
        client = PolicyClient(host="127.0.0.1", port=port)
        try:
            client.ping()
            with pytest.raises(RuntimeError):
                client.call_endpoint("teleport", requires_input=False)
        finally:
            client.close()
        metrics = httpx.get(f"{server.url}/metrics").text
    assert 'route="gr00t",status="200"' in metrics
    assert 'route="gr00t",status="400"' in metrics


# What each family announces, from the policy's spec ---------------------------------------


def spec(**fields: Any) -> PolicySpec:
    return PolicySpec(family="t", action_horizon=4, action_dim=8, **fields)


@pytest.mark.parametrize(
    ("fields", "asked"),
    [
        ({}, {"exterior_image_1_left": "exterior_image_1_left",
              "wrist_image_left": "wrist_image_left"}),
        ({"camera_names": ("wrist_image_left", "exterior_image_2_left")},
         {"exterior_image_2_left": "exterior_image_2_left",
          "wrist_image_left": "wrist_image_left"}),
        ({"camera_names": ("wrist", "left"),
          "camera_aliases": {"wrist_image_left": "wrist", "exterior_image_1_left": "left"}},
         {"exterior_image_1_left": "left", "wrist_image_left": "wrist"}),
        ({"camera_names": ("top",)}, {"exterior_image_1_left": "top"}),
        ({"camera_names": ("top", "hand")},
         {"exterior_image_1_left": "top", "wrist_image_left": "hand"}),
        ({"camera_names": ("a", "b", "c")},
         {"exterior_image_1_left": "a", "exterior_image_2_left": "b", "wrist_image_left": "c"}),
    ],
)  # fmt: skip
def test_roboarena_asks_for_the_policys_cameras(
    fields: dict[str, Any], asked: dict[str, str]
) -> None:
    from vla_client.server.edge.families.roboarena import arena_cameras, config_document

    assert arena_cameras(spec(**fields)) == asked
    config = config_document(spec(**fields))
    assert config["needs_wrist_camera"] == ("wrist_image_left" in asked)
    assert config["n_external_cameras"] == len(asked) - config["needs_wrist_camera"]


def test_roboarena_refuses_a_policy_its_messages_cannot_carry() -> None:
    from vla_client.server.edge.families.roboarena import check

    settings = ProtocolSettings("roboarena")
    with pytest.raises(ValueError, match=r"at most 3 cameras .* takes 4"):
        check(spec(camera_names=("a", "b", "c", "d")), settings)
    with pytest.raises(ValueError, match=r"state is 8 values .* this policy takes 7"):
        check(spec(state_dim=7), settings)
    check(spec(state_dim=8, image_size=(180, 320)), settings)


def test_vllm_omni_and_gr00t_configs_come_from_the_spec() -> None:
    from vla_client.server.edge.families import gr00t, vllm_omni

    sized = spec(image_size=(180, 320))
    omni = vllm_omni.config_document(sized, ProtocolSettings("vllm-omni"))
    assert omni == {"action_horizon": 4, "needs_session_id": False, "image_resolution": [180, 320]}
    config = gr00t.modality_config(spec(), ProtocolSettings("gr00t"))
    keys = {name: block["as_json"]["modality_keys"] for name, block in config.items()}
    assert keys == {
        "video": ["camera"], "state": ["state"], "action": ["action"],
        "language": ["annotation.human.task_description"],
    }  # fmt: skip
    assert config["action"]["as_json"]["delta_indices"] == [0, 1, 2, 3]


class DroidCheckpoint:
    """What an openpi DROID checkpoint is to the server: ``infer(obs) -> {"actions"}``. Its
    actions are the digest of the frames it was handed, as `arena_rows` lays them out."""

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        images = {name: obs[f"observation/{name}"] for name in DROID_CAMERAS}
        state = np.concatenate(
            [obs["observation/joint_position"], obs["observation/gripper_position"]]
        )
        return {"actions": arena_rows(images, state)}


DROID_CAMERAS = ("exterior_image_1_left", "wrist_image_left")


def test_roboarenas_client_drives_an_openpi_droid_policy_served_here() -> None:
    from vla_client.server.policies import OpenpiPolicy

    policy = OpenpiPolicy(DroidCheckpoint(), layout="droid", action_horizon=9, action_dim=8)
    with served(policy, ProtocolSettings("roboarena"), in_process=True) as server:
        client = websocket_client_policy.WebsocketClientPolicy("127.0.0.1", server.port)
        images, state = frames(DROID_CAMERAS), np.arange(8, dtype=np.float64) / 8
        actions = client.infer(evaluator_request(images, state))
        with connect(f"ws://127.0.0.1:{server.port}/openpi/policy") as ws:  # openpi's stays
            assert msgpack_numpy.unpackb(ws.recv())["policy_family"] == "openpi"
    np.testing.assert_array_equal(actions, arena_rows(images, state))


def test_gr00t_reads_no_request_past_the_body_limit() -> None:
    config = ServerConfig(
        in_process=True, max_body_bytes=64 * 1024, protocol=ProtocolSettings("gr00t", port=0)
    )
    with LocalServer(create_app(DigestPolicy(camera_names=("front",)), config)) as server:
        port = int(server.app.state.protocol_url.rsplit(":", 1)[1])
        flood = PolicyClient(host="127.0.0.1", port=port, timeout_ms=500)
        later = PolicyClient(host="127.0.0.1", port=port)
        try:
            with pytest.raises(zmq.Again):  # dropped unread: no answer
                flood.call_endpoint("ping", {"padding": b"x" * (128 * 1024)})
            assert later.ping()  # the server serves on
        finally:
            flood.close()
            later.close()
