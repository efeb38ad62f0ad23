"""``vla-client send|metadata|bench|eval tcp://...``: the commands against a GR00T server
(tests/gr00t_server.py), with the cameras and state sizes taken from what it announces."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from gr00t_server import Gr00tServer, from_bytes
from vla_client.cli import main

pytest.importorskip("zmq")

SPLIT = ("--state-split", "arm=6", "--state-split", "gripper=1")


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    def run(*args: str) -> Run:
        code = main(list(args))
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


def test_metadata_shows_the_modality_config_and_the_state_the_split_makes(cli) -> None:
    with Gr00tServer(horizon=6) as server:
        run = cli("metadata", server.url, *SPLIT, "--json")
    assert run.code == 0, run.err
    document = json.loads(run.out)
    assert document["policy_family"] == "gr00t"
    assert document["input"]["image_keys"] == ["front", "wrist"]
    assert document["input"]["state_dim"] == 7
    assert document["output"]["action_horizon"] == 6
    assert document["gr00t"]["state_keys"] == ["arm", "gripper"]
    assert document["client_checks"]["cameras"] == ["front", "wrist"]


def test_send_names_its_cameras_and_sizes_its_state_as_the_server_announces(cli) -> None:
    with Gr00tServer(api_token="k") as server:
        run = cli("send", server.url, "--endpoint", "gr00t", "--api-key", "k", *SPLIT,
                  "--repeat", "2", "--json")  # fmt: skip
    assert run.code == 0, run.err
    assert json.loads(run.out)["action_shape"] == [4, 7]
    sent = from_bytes(server.frames[-1])["data"]["observation"]
    assert sorted(sent["video"]) == ["front", "wrist"]
    assert {k: v.shape for k, v in sent["state"].items()} == {
        "arm": (1, 1, 6),
        "gripper": (1, 1, 1),
    }
    assert sent["state"]["arm"].dtype == np.float32


def test_send_without_the_split_says_which_flag_to_give(cli) -> None:
    with Gr00tServer() as server:
        run = cli("send", server.url, "--state", "0,0,0,0,0,0,0")
    assert run.code == 1
    assert "--state-split" in run.err and len(run.err.strip().splitlines()) == 1


def test_send_without_a_state_names_the_flag(cli) -> None:
    with Gr00tServer() as server:
        run = cli("send", server.url)
    assert run.code == 1
    assert "--state" in run.err and len(run.err.strip().splitlines()) == 1


def test_bench_measures_gr00ts_one_path(cli) -> None:
    with Gr00tServer() as server:
        run = cli("bench", server.url, *SPLIT, "--repeat", "2", "--warmup", "1")
    assert run.code == 0, run.err
    assert "raw/msgpack/zmq" in run.out
    assert server.endpoints.count("get_action") == 3


def test_eval_resets_the_server_at_each_episode(cli) -> None:
    """The reach task's two cameras, one-value state and 2-D actions, served by GR00T."""
    with Gr00tServer(
        video_keys=("top", "wrist"), state_keys=("clock",), action_dims={"xy": 2}, horizon=8
    ) as server:
        run = cli("eval", server.url, "--state-split", "clock=1", "--episodes", "2",
                  "--round-trip-ms", "20", "--max-steps", "20", "--json")  # fmt: skip
    assert run.code == 0, run.err
    assert len(json.loads(run.out)["cells"][0]["episodes"]) == 2
    assert server.endpoints.count("reset") == 2
    first_reset = server.endpoints.index("reset")
    assert "get_action" in server.endpoints[first_reset:]


def test_a_tcp_url_with_another_endpoint_is_a_usage_error(cli) -> None:
    run = cli("metadata", "tcp://127.0.0.1:5555", "--endpoint", "openpi", "--timeout", "1")
    assert run.code == 2
    assert "tcp://" in run.err and len(run.err.strip().splitlines()) == 1
