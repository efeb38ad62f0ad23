"""PNG requests in JSON as other clients write them, sent with curl to a real server: the base64
text the server cuts from the body gives the pixels the JSON parser would, an escaped ``\\/``
included, and a string no JSON parser takes is a 400 with a JSON detail, after which the server
keeps serving."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from oracles import assert_actions_equal, oracle_actions
from vla_client import Observation
from vla_client.codecs import b64encode_text, encode_png
from vla_client.protocol import read_actions

GENERATIONS = "/v1/actions/generations"
pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


def _body(observation: Observation) -> dict[str, object]:
    images = {name: {"b64_json": b64encode_text(encode_png(frame))}
              for name, frame in observation.images.items()}  # fmt: skip
    state = observation.state.tolist() if observation.state is not None else None
    return {"input": {"task": observation.task, "observation": {"images": images, "state": state}}}


def _curl(url: str, body: bytes, tmp_path: Path) -> tuple[int, dict[str, object]]:
    path = tmp_path / "body.json"
    path.write_bytes(body)
    done = subprocess.run(
        ["curl", "-s", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
         "--data-binary", f"@{path}", url + GENERATIONS],
        capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    reply, _, status = done.stdout.rpartition(b"\n")
    return int(status), json.loads(reply)


@pytest.mark.parametrize("escaped", [False, True], ids=["as written", "slashes escaped"])
def test_png_bodies_as_pythons_json_writes_them_give_the_oracle_chunk(
    server_url, camera_frames, tmp_path, escaped
) -> None:
    observation = Observation(camera_frames, state=np.linspace(-1, 1, 7), task="stack")
    body = json.dumps(_body(observation), indent=1).encode()  # as `requests.post(json=)` writes
    assert len(body) > 64 * 1024 and b"/" in body  # big enough for the fast path, and a "/" in it
    if escaped:
        body = body.replace(b"/", b"\\/")
    status, reply = _curl(server_url, body, tmp_path)
    assert status == 200, reply
    expected = oracle_actions(observation, horizon=10, action_dim=7)
    assert_actions_equal(read_actions(reply)[0], expected)


def test_a_control_character_in_the_base64_text_is_a_400_naming_the_camera(
    server_url, camera_frames, tmp_path
) -> None:
    observation = Observation(camera_frames, task="stack")
    document = _body(observation)
    images = document["input"]["observation"]["images"]  # type: ignore[index]
    name = next(iter(observation.images))
    text = images[name]["b64_json"]
    images[name]["b64_json"] = "PLACE"
    body = (
        json.dumps(document)
        .encode()
        .replace(b"PLACE", text[:100].encode() + b"\x01" + text[100:].encode())
    )
    status, reply = _curl(server_url, body, tmp_path)
    assert status == 400 and name in str(reply["detail"]), reply
    status, reply = _curl(server_url, json.dumps(_body(observation)).encode(), tmp_path)
    assert status == 200 and read_actions(reply)[0].shape == (10, 7), reply
