"""``vla-client ros2``'s command line: every option checked before the node joins the graph
(one line, exit 2), and what stops it before the loop (one line, exit 1)."""

from __future__ import annotations

import socket
import sys

import pytest

from vla_client.cli import main
from vla_client.server import LocalServer, ReferencePolicy, create_app

pytest.importorskip("zenoh")

BASE = [
    "ros2", "--url", "http://127.0.0.1:1", "--image", "/wrist/image_raw=wrist",
    "--state", "/joint_states", "--command", "/command", "--command-type", "array",
]  # fmt: skip


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main([*BASE, *args])
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    return code, err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--image", "wrist"], "takes TOPIC=NAME, as in /camera/image_raw=wrist; got 'wrist'"),
        (["--image", "/wrist/image_raw=other"], "--image names each topic and each camera once"),
        (["--state", "joint states"], "takes a ROS topic name"),
        (["--joints", "j1,,j2"], "takes joint names separated by commas, each once"),
        (["--joints", "j1,j1"], "each once"),
        (["--low", "nan"], "takes a finite number or numbers separated by commas"),
        (["--max-delta", "0.1,x"], "got '0.1,x'"),
        (["--rate", "0"], "must be 0.1..1000 Hz, got '0'"),
        (["--max-age-ms", "-1"], "must be a number above 0, got '-1'"),
        (["--max-skew-ms", "600"], "--max-skew-ms 600 is not below --max-age-ms 500"),
        (["--mode", "rtc", "--prefetch-at", "2"], "--prefetch-at is not for --mode rtc"),
        (["--router", "localhost:7447"], "--router or --domain: router 'localhost:7447'"),
        (["--domain", "999"], "domain id 999"),
        (["--on-bounds", "ignore"], "invalid choice: 'ignore'"),
        (["--max-refusals", "0"], "--max-refusals"),
    ],
)
def test_a_wrong_option_is_one_line_naming_it(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(capsys, *args)
    assert code == 2
    assert err.startswith("vla-client: error: ") and says in err


def test_a_ros_domain_id_that_is_not_a_number(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROS_DOMAIN_ID", "seven")
    code, err = run(capsys)
    assert code == 2 and "$ROS_DOMAIN_ID is 'seven': set it to a whole number" in err


def test_without_the_ros2_extra_it_names_the_pip_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "zenoh", None)  # import zenoh raises ImportError
    code, err = run(capsys)
    assert code == 1
    assert "needs the 'ros2' extra (zenoh is not installed): pip install 'vla-client[ros2]'" in err


def test_no_router_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(capsys, "--router", f"tcp/127.0.0.1:{free_port()}")
    assert code == 1 and "no Zenoh router answered" in err


def test_a_server_that_is_down_at_the_start_is_one_line(
    capsys: pytest.CaptureFixture[str], zenoh_router: str
) -> None:
    code, err = main_with(
        capsys, "--url", f"http://127.0.0.1:{free_port()}", "--router", zenoh_router
    )
    assert code == 1 and "127.0.0.1" in err


def test_joints_of_another_count_than_the_servers_actions(
    capsys: pytest.CaptureFixture[str], zenoh_router: str
) -> None:
    with LocalServer(create_app(ReferencePolicy(action_horizon=4, action_dim=3))) as server:
        code, err = main_with(
            capsys, "--url", server.url, "--router", zenoh_router, "--joints", "j1,j2"
        )
    assert code == 2
    assert "--joints names 2 joints, the server at" in err and "gives actions of 3 values" in err


def test_rtc_against_a_server_that_does_not_announce_it(
    capsys: pytest.CaptureFixture[str], zenoh_router: str
) -> None:
    with LocalServer(create_app(ReferencePolicy(action_horizon=4, action_dim=3))) as server:
        code, err = main_with(
            capsys, "--url", server.url, "--router", zenoh_router, "--mode", "rtc"
        )
    assert code == 1 and "announces no real-time chunking" in err


def main_with(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`run` with `--url` and the other options given here taking the place of the base's."""
    base = list(BASE)
    if "--url" in args:
        del base[1:3]
    code = main([*base, *args])
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return code, err


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
