"""``send``, ``bench`` and ``metadata`` against a server with fixed camera names, image size and
state length: synthetic frames are made to fit, and what does not fit is refused unsent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.policy import PolicyInput, PolicySpec

PI05 = ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")


class SeeingPolicy(ReferencePolicy):
    """The reference policy with Pi0.5's cameras, noting what each observation looked like."""

    def __init__(self, **options: object) -> None:
        super().__init__(camera_names=PI05, state_dim=8, image_size=(96, 128), **options)  # type: ignore[arg-type]
        self.seen: list[tuple[dict[str, tuple[int, ...]], int | None]] = []

    def infer(self, observation: PolicyInput) -> np.ndarray:
        shapes = {name: frame.shape for name, frame in observation.images.items()}
        state = None if observation.state is None else observation.state.size
        self.seen.append((shapes, state))
        return super().infer(observation)


@pytest.fixture(scope="module")
def pi05() -> Iterator[tuple[str, SeeingPolicy]]:
    policy = SeeingPolicy()
    with LocalServer(create_app(policy, ServerConfig(in_process=True))) as server:
        yield server.url, policy


@pytest.fixture
def served(pi05: tuple[str, SeeingPolicy]) -> tuple[str, SeeingPolicy]:
    pi05[1].seen.clear()
    return pi05


def test_send_with_no_camera_flags_fits_the_server(cli, served) -> None:
    url, policy = served
    run = cli("send", url, "--json")
    assert run.code == 0, run.err
    ((shapes, state),) = policy.seen
    assert shapes == dict.fromkeys(PI05, (96, 128, 3)) and state == 8
    assert json.loads(run.out)["requests"] == 1


def test_send_over_the_websocket_fits_the_server_too(cli, served) -> None:
    url, policy = served
    run = cli("send", "ws" + url.removeprefix("http"))
    assert run.code == 0, run.err
    assert set(policy.seen[0][0]) == set(PI05)


def test_bench_runs_against_fixed_camera_names(cli, served, tmp_path) -> None:
    url, policy = served
    report = tmp_path / "bench.json"
    run = cli(
        "bench", url, "--repeat", "1", "--warmup", "0", "--encodings", "png,raw",
        "--transports", "http", "--save", str(report),
    )  # fmt: skip
    assert run.code == 0, run.err + run.out
    results = json.loads(report.read_text())["results"]
    assert [r["error"] for r in results] == [None] * 4
    assert len(policy.seen) == 4 and all(set(shapes) == set(PI05) for shapes, _ in policy.seen)


def test_cameras_that_do_not_fit_are_refused_before_sending(cli, error_line, served) -> None:
    url, policy = served
    run = cli("send", url, "--camera", "wrist=synthetic", "--camera", "left=synthetic:1")
    assert run.code == 1
    line = error_line(run.err)
    assert "input.image_keys" in line
    assert "--camera-map wrist=base_0_rgb --camera-map left=left_wrist_0_rgb" in line
    run = cli("send", url, "--cameras", "2")  # named as the server names them: one is missing
    assert "missing ['right_wrist_0_rgb']" in error_line(run.err)
    assert policy.seen == []  # nothing reached the server


def test_a_camera_map_makes_the_robots_names_fit(cli, served) -> None:
    url, policy = served
    mapping = [
        ("wrist", "left_wrist_0_rgb"),
        ("left", "base_0_rgb"),
        ("right", "right_wrist_0_rgb"),
    ]
    flags = [f"--camera-map={local}={server}" for local, server in mapping]
    cameras = [f"--camera={local}=synthetic:{seed}" for seed, (local, _) in enumerate(mapping)]
    run = cli("send", url, *cameras, *flags, "--state", ",".join("0" * 8))
    assert run.code == 0, run.err
    assert set(policy.seen[0][0]) == set(PI05)


def test_a_camera_map_naming_a_camera_twice_is_a_usage_error(cli, usage_error, served) -> None:
    url, policy = served
    run = cli("send", url, "--camera-map=wrist=a", "--camera-map=wrist=b")
    assert "--camera-map" in usage_error(run)
    assert policy.seen == []


def test_metadata_prints_what_the_client_checks(cli, served) -> None:
    url, _ = served
    run = cli("metadata", url, "--resize", "pad", "--json")
    assert run.code == 0, run.err
    document = json.loads(run.out)
    assert document["input"]["image_keys"] == list(PI05)
    checks = document["client_checks"]
    assert checks["cameras"] == list(PI05) and checks["state_dim"] == 8
    assert checks["image_size"] == [96, 128] and checks["resize"] == "pad"


class ArmPolicy(ReferencePolicy):
    """A policy of one's own, named in its spec."""

    @property
    def spec(self) -> PolicySpec:
        return replace(super().spec, family="acme-arm")


@pytest.mark.parametrize(("model_name", "model"), [(None, "acme-arm"), ("arm-v2", "arm-v2")])
def test_metadata_names_the_policy_served_unless_configured(cli, model_name, model) -> None:
    config = ServerConfig(in_process=True, model_name=model_name)
    with LocalServer(create_app(ArmPolicy(), config)) as server:
        run = cli("metadata", server.url, "--json")
    assert run.code == 0, run.err
    document = json.loads(run.out)
    assert document["model"] == model and document["policy_family"] == "acme-arm"
