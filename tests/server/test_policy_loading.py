"""Policies of one's own: by import path, by plugin, and openpi policies through the adapter."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest
from my_policies import READY, Constant, FakeOpenpiPolicy

from digest_policy import sha256_rows
from vla_client import ActionClient, Observation
from vla_client.errors import PolicyLoadError
from vla_client.protocol import LAYOUTS
from vla_client.server import POLICIES, LocalServer, ServerConfig, create_app
from vla_client.server.policies import OpenpiPolicy
from vla_client.server.policies.loading import available_policies, load_policy, parse_options

websocket_client_policy = pytest.importorskip("openpi_client.websocket_client_policy")
pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning")


def test_an_import_path_gives_a_class_a_factory_or_an_instance() -> None:
    policy = load_policy("my_policies:Constant", {"horizon": 8, "value": 1.5})
    assert isinstance(policy, Constant) and policy.spec.action_horizon == 8
    made = load_policy("my_policies:make_constant", parse_options(["horizon=6", "value=0.5"]))
    assert made.spec.action_horizon == 6 and made.value == 0.5
    assert load_policy("my_policies:READY") is READY


def test_a_named_policy_served_by_the_worker_answers_its_own_actions() -> None:
    policy = load_policy("my_policies:make_constant", {"horizon": 8, "value": 0.125})
    with LocalServer(create_app(policy, ServerConfig())) as server, ActionClient(server.url) as c:
        actions = c.infer(Observation({"cam": np.zeros((8, 8, 3), np.uint8)})).actions
    np.testing.assert_array_equal(actions, np.full((8, 3), 0.125, np.float32))


@pytest.mark.parametrize(
    ("name", "options", "said"),
    [
        ("no_such_module:Thing", {}, "cannot import 'no_such_module'"),
        ("my_policies:Missing", {}, "has no attribute 'Missing'"),
        ("my_policies:NUMBER", {}, "is int, not a Policy"),
        ("my_policies:not_a_policy", {}, "returned str, not a Policy"),
        ("my_policies:broken_factory", {}, "raised RuntimeError: no checkpoint here"),
        ("my_policies:make_constant", {"speed": 2}, "takes no option 'speed'; it takes horizon"),
        ("my_policies:READY", {"horizon": 2}, "a ready Policy; it takes no options"),
        ("bogus", {}, "unknown policy 'bogus'; choose one of reference, replay, torch"),
        ("module.only", {}, "unknown policy"),
    ],
)
def test_every_way_to_fail_is_one_line_naming_the_cause(
    name: str, options: dict[str, object], said: str
) -> None:
    with pytest.raises(PolicyLoadError, match=said) as caught:
        load_policy(name, options)
    assert "\n" not in str(caught.value)


def test_options_are_json_where_they_parse_and_text_otherwise(tmp_path: Path) -> None:
    file = tmp_path / "policy.toml"
    file.write_text('horizon = 3\nname = "from file"\n')
    options = parse_options(
        ["value=0.5", 'names=["a","b"]', "label=wrist cam", "horizon=9"], str(file)
    )
    assert options == {
        "horizon": 9, "name": "from file", "value": 0.5, "names": ["a", "b"], "label": "wrist cam",
    }  # fmt: skip
    with pytest.raises(PolicyLoadError, match="KEY=VALUE"):
        parse_options(["=3"])
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(PolicyLoadError, match="a table of options"):
        parse_options([], str(tmp_path / "bad.json"))


@pytest.mark.usefixtures("plugin")
def test_a_plugin_is_listed_and_serves_and_a_broken_one_is_listed_with_its_error() -> None:
    entries = {entry.name: entry for entry in available_policies(POLICIES)}
    assert {"reference", "replay", "torch", "acme", "broken"} <= set(entries)
    assert entries["acme"].summary == "Acme's arm policy." and entries["acme"].error is None
    assert "ModuleNotFoundError" in (entries["broken"].error or "")
    policy = load_policy("acme", {"value": 0.5})
    with LocalServer(create_app(policy, ServerConfig())) as server, ActionClient(server.url) as c:
        actions = c.infer(Observation({"cam": np.zeros((8, 8, 3), np.uint8)})).actions
    np.testing.assert_array_equal(actions, np.full((5, 3), 0.5, np.float32))
    with pytest.raises(PolicyLoadError, match="failed to import"):
        load_policy("broken")


def robot_observation(layout_name: str) -> Observation:
    layout = LAYOUTS[layout_name]
    names = layout.cameras or ("top", "side")
    rng = np.random.default_rng(5)
    frames = {name: rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for name in names}
    return Observation(frames, np.linspace(0, 1, layout.state_dim or 4), task="stack")


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_openpi_adapter_serves_an_openpi_policy_on_every_route(layout: str) -> None:
    observation = robot_observation(layout)
    want = sha256_rows(dict(observation.images), observation.state)
    factory = partial(FakeOpenpiPolicy, layout)  # made in the worker, by `load()`
    policy = OpenpiPolicy(factory, layout=layout, action_horizon=len(want), action_dim=33)
    with LocalServer(create_app(policy, ServerConfig(openpi_layout=layout))) as server:
        port = server.port
        for url, options in (
            (server.url, {"encoding": "raw", "wire": "msgpack"}),
            (f"ws://127.0.0.1:{port}", {}),
            (f"ws://127.0.0.1:{port}/openpi/policy", {"layout": layout}),
        ):
            with ActionClient(url, **options) as client:  # type: ignore[arg-type]
                np.testing.assert_array_equal(client.infer(observation).actions, want)
        theirs = websocket_client_policy.WebsocketClientPolicy("127.0.0.1", port)
        request = LAYOUTS[layout].encode(observation, dict(observation.images))
        np.testing.assert_array_equal(theirs.infer(request)["actions"], want)


def test_the_adapter_refuses_what_is_not_an_openpi_policy() -> None:
    with pytest.raises(TypeError, match="infer"):
        OpenpiPolicy(42, action_horizon=1, action_dim=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'flat', 'droid'"):
        OpenpiPolicy(FakeOpenpiPolicy("droid"), layout="bridge", action_horizon=1, action_dim=1)
    adapter = OpenpiPolicy(FakeOpenpiPolicy("droid"), action_horizon=2, action_dim=33)
    adapter.reset()
    assert adapter._policy.resets == 1  # type: ignore[union-attr]
    assert adapter.spec.camera_names == ("exterior_image_1_left", "wrist_image_left")
    assert adapter.spec.state_dim == 8
