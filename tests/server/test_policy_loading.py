"""Policies of one's own: by import path, by plugin, and openpi policies through the adapter."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from my_policies import (
    READY,
    Constant,
    FakeOpenpiPolicy,
    broken_factory,
    make_any,
    make_constant,
    make_needing,
)

from digest_policy import sha256_rows
from vla_client import ActionClient, Observation
from vla_client.errors import PolicyLoadError
from vla_client.protocol import LAYOUTS
from vla_client.server import POLICIES, LocalServer, ServerConfig, create_app
from vla_client.server.policies import OpenpiPolicy
from vla_client.server.policies.loading import (
    OptionNames,
    PolicyEntry,
    available_policies,
    load_policy,
    option_names,
    parse_options,
    resolve_policy,
)

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


def install(folder: Path, dist: str, points: str) -> None:
    """A distribution named `dist` in `folder` whose entry points in our group are `points`:
    what `pip install` leaves, read by importlib.metadata once `folder` is on sys.path."""
    info = folder / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[vla_client.policies]\n{points}")


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for the test's own modules and distributions."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("loading_test_"):
            del sys.modules[name]


def test_the_listing_shows_built_ins_then_each_plugin_by_name_whatever_it_holds(
    on_path: Path,
) -> None:
    (on_path / "loading_test_empty.py").write_text("raise RuntimeError()\n")
    install(
        on_path,
        "zoo",
        "ee_empty = loading_test_empty:make\ndd_nodoc = my_policies:broken_factory\n"
        "cc_openpi = my_policies:FakeOpenpiPolicy\nbb_good = my_policies:make_constant\n"
        "aa_broken = loading_test_missing:make\n",
    )
    builtins = {"const": Constant, "nodoc": broken_factory}
    entries = [e for e in available_policies(builtins) if e.origin == "built in" or "_" in e.name]
    assert entries == [
        PolicyEntry("const", "built in", "Answers `value` everywhere: a chunk a test can tell "
                    "from any other policy's."),
        PolicyEntry("nodoc", "built in", ""),
        PolicyEntry("aa_broken", "loading_test_missing:make",
                    error="ModuleNotFoundError: No module named 'loading_test_missing'"),
        PolicyEntry("bb_good", "my_policies:make_constant",
                    "A factory: what `--policy my_policies:make_constant` calls."),
        PolicyEntry("cc_openpi", "my_policies:FakeOpenpiPolicy",
                    "Written to openpi's documented interface: ``infer(obs: dict) -> dict`` "
                    "with ``actions``,", "not a Policy, a Policy subclass or a factory"),
        PolicyEntry("dd_nodoc", "my_policies:broken_factory", ""),
        PolicyEntry("ee_empty", "loading_test_empty:make", error="RuntimeError"),
    ]  # fmt: skip


def test_two_plugins_of_one_name_the_first_on_sys_path_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path / "later", "later_dist", "twin = my_policies:Constant\n")
    install(tmp_path / "first", "first_dist", "twin = my_policies:make_constant\n")
    monkeypatch.syspath_prepend(str(tmp_path / "later"))
    monkeypatch.syspath_prepend(str(tmp_path / "first"))  # as an import would find it
    assert resolve_policy("twin") == (make_constant, "my_policies:make_constant")
    twins = [e.origin for e in available_policies({}) if e.name == "twin"]
    assert twins == ["my_policies:make_constant", "my_policies:Constant"]


@pytest.mark.usefixtures("plugin")
def test_a_plugin_that_fails_to_import_is_named_with_its_error() -> None:
    with pytest.raises(PolicyLoadError) as caught:
        load_policy("broken")
    assert str(caught.value) == (
        "policy plugin 'broken' (acme_policies.nope:make) failed to import: "
        "ModuleNotFoundError: No module named 'acme_policies.nope'"
    )


def test_option_names_are_read_from_the_signature() -> None:
    assert option_names(READY) == OptionNames(frozenset(), frozenset())
    assert option_names(min) == OptionNames(None, frozenset())  # no signature to read
    assert option_names(make_constant) == OptionNames(frozenset({"horizon", "value"}), frozenset())
    assert option_names(make_needing) == OptionNames(
        frozenset({"checkpoint", "horizon"}), frozenset({"checkpoint"})
    )
    assert option_names(make_any) == OptionNames(None, frozenset())
    assert option_names(partial(make_needing)) == OptionNames(
        frozenset({"checkpoint", "horizon"}), frozenset({"checkpoint"})
    )

    def needs_some(weights: str, **options: object) -> Constant:
        return Constant()

    assert option_names(needs_some) == OptionNames(None, frozenset({"weights"}))


def test_a_factory_that_takes_any_option_gets_them_all() -> None:
    policy = load_policy("my_policies:make_any", {"horizon": 7, "anything": "goes"})
    assert policy.spec.action_horizon == 7
    assert load_policy("my_policies:make_needing", {"checkpoint": "abc"}).value == 3.0  # type: ignore[attr-defined]


def test_an_attribute_path_may_be_dotted() -> None:
    target, origin = resolve_policy("my_policies:Constant.infer")
    assert (target, origin) == (Constant.infer, "my_policies:Constant.infer")


IMPORT_PATH = "a policy import path looks like package.module:attribute, got "


@pytest.mark.parametrize(
    ("name", "options", "said"),
    [
        (":Constant", {}, f"{IMPORT_PATH}':Constant'"),
        ("my_policies:", {}, f"{IMPORT_PATH}'my_policies:'"),
        ("my_policies:Constant:x", {}, "'my_policies' has no attribute 'Constant:x'"),
        ("loading_test_empty:make", {}, "importing 'loading_test_empty' failed: RuntimeError"),
        ("loading_test_gpu:make", {}, "importing 'loading_test_gpu' failed: RuntimeError: no GPU"),
        ("my_policies:NUMBER", {},
         "my_policies:NUMBER is int, not a Policy, a Policy subclass or a factory"),
        ("my_policies:make_constant", {"speed": 2},
         "my_policies:make_constant takes no option 'speed'; it takes horizon, value"),
        ("my_policies:not_a_policy", {"x": 1},
         "my_policies:not_a_policy takes no option 'x'; it takes none"),
    ],
)  # fmt: skip
def test_each_failure_reads_exactly(
    on_path: Path, name: str, options: dict[str, object], said: str
) -> None:
    (on_path / "loading_test_empty.py").write_text("raise RuntimeError()\n")
    (on_path / "loading_test_gpu.py").write_text("raise RuntimeError('no GPU\\nat all')\n")
    with pytest.raises(PolicyLoadError) as caught:
        load_policy(name, options)
    assert str(caught.value) == said


def test_a_value_may_hold_an_equals_sign() -> None:
    assert parse_options(["label=a=b", "x=1"]) == {"label": "a=b", "x": 1}


@pytest.mark.parametrize(
    ("file", "text", "said"),
    [
        ("opts.toml", "horizon = ", "not valid TOML: "),
        ("opts.json", "{", "not valid JSON: "),
        ("opts", "{", "not valid JSON: "),
        ("opts.toml", "x = 1\n", ""),
    ],
)
def test_an_options_file_that_does_not_parse_is_named_with_its_format(
    tmp_path: Path, file: str, text: str, said: str
) -> None:
    path = tmp_path / file
    path.write_text(text)
    if not said:
        assert parse_options([], str(path)) == {"x": 1}
        return
    with pytest.raises(PolicyLoadError) as caught:
        parse_options([], str(path))
    assert str(caught.value).startswith(f"policy options {path} are {said}")
    assert "\n" not in str(caught.value)


def test_an_options_file_that_cannot_be_read_is_named_with_why(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    with pytest.raises(PolicyLoadError) as caught:
        parse_options([], str(missing))
    assert str(caught.value) == f"cannot read policy options {missing}: No such file or directory"


def test_an_options_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    path = tmp_path / "opts.toml"
    path.write_text('label = "caméra"\n', encoding="utf-8")
    assert parse_options([], str(path)) == {"label": "caméra"}  # here, and in ASCII's locale:
    code = (
        "import sys; from vla_client.server.policies.loading import parse_options; "
        "print(ascii(parse_options([], sys.argv[1])))"
    )
    env = {**os.environ, "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    done = subprocess.run(
        [sys.executable, "-X", "utf8=0", "-c", code, str(path)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ascii({"label": "caméra"})


def test_an_options_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "opts.json"
    path.write_bytes(b'{"label": "cam\xe9ra"}')
    with pytest.raises(PolicyLoadError) as caught:
        parse_options([], str(path))
    assert str(caught.value) == (
        f"policy options {path} are not UTF-8 text: invalid continuation byte at byte 14"
    )


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
