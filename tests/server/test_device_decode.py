"""JPEG frames decoded where the policy runs (the GPU decode path), as far as a machine without
CUDA can run it: the hand-off of undecoded frames to the worker, the CPU decoder that stands in
for the GPU one, the timings that say which ran, and the CUDA branch's choices and failures."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import cv2
import httpx
import numpy as np
import pytest

from vla_client import ActionClient, CodecError, Observation, PayloadTooLargeError
from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import decode_image_bytes, encode_jpeg
from vla_client.codecs.b64 import b64encode_text
from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.wire.decode import kept_jpeg

torch = pytest.importorskip("torch")
from vla_client.server.engine.device_decode import frame_decoder  # noqa: E402
from vla_client.server.policies import TorchCNNPolicy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FRAMES = synthetic_frames(("wrist", "left", "right"), 120, 160, seed=4)


@contextmanager
def _serve(jpeg_decode: str, **settings: object) -> Iterator[LocalServer]:
    policy = TorchCNNPolicy(action_horizon=4, action_dim=3, jpeg_decode=jpeg_decode)
    server = LocalServer(create_app(policy, ServerConfig(**settings)))  # type: ignore[arg-type]
    server.start(timeout=60)  # torch takes a while to import in the worker
    try:
        yield server
    finally:
        server.stop()


def _infer(server: LocalServer, encoding: str, **options: object) -> tuple[np.ndarray, dict]:
    with ActionClient(server.url, encoding=encoding) as client:  # type: ignore[arg-type]
        result = client.infer(Observation(FRAMES, task="reach"), **options)  # type: ignore[arg-type]
    return result.actions, dict(result.timings.server)


def test_jpeg_frames_decoded_by_the_policy_give_the_same_actions_and_say_so() -> None:
    with _serve("entrypoint") as at_entrypoint:
        expected, timings = _infer(at_entrypoint, "jpeg")
    assert not [key for key in timings if key.startswith("decode_")]  # in preprocess_ms
    with _serve("worker") as in_worker:
        actions, timings = _infer(in_worker, "jpeg")
        assert timings["decode_cpu_ms"] > 0  # no GPU here: the worker's CPU decoded them
        np.testing.assert_array_equal(actions, expected)
        _, png_timings = _infer(in_worker, "png")  # only JPEG goes through undecoded
        assert "decode_cpu_ms" not in png_timings


@pytest.mark.parametrize("in_process", [False, True])
def test_digests_are_of_the_decoded_pixels_either_way(in_process: bool) -> None:
    with (
        _serve("worker", in_process=in_process) as server,
        ActionClient(server.url, encoding="jpeg") as client,
    ):
        result = client.infer(Observation(FRAMES), return_digest=True)
    wanted = {name: decode_image_bytes(encode_jpeg(frame)).shape for name, frame in FRAMES.items()}
    assert result.digests is not None
    assert {name: tuple(d["shape"]) for name, d in result.digests.items()} == wanted


def test_without_a_gpu_the_default_decodes_at_the_entrypoint() -> None:
    policy = TorchCNNPolicy()
    policy.load()
    assert frame_decoder(torch.device("cpu")).path == "cpu"
    assert policy.decodes_jpeg() is False  # auto: the CPU path, as before
    with pytest.raises(ValueError, match="jpeg_decode must be one of 'auto', 'worker'"):
        TorchCNNPolicy(jpeg_decode="gpu")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is not there either
        return False


@pytest.mark.skipif(
    _installed("torchvision") or _installed("nvidia.nvimgcodec"), reason="a GPU decoder is here"
)
def test_the_cuda_branch_falls_to_the_cpu_decoder_when_no_gpu_decoder_is_installed() -> None:
    decoder = frame_decoder(torch.device("cuda"))  # made without touching the device
    assert decoder.path == "cpu" and decoder.device.type == "cuda"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the failure without CUDA")
def test_a_torch_policy_asked_for_cuda_without_one_fails_to_start_in_one_line() -> None:
    app = create_app(TorchCNNPolicy(device="cuda"), ServerConfig())
    with pytest.raises(RuntimeError, match=r"policy failed to (load|warm up): \w+Error: "):
        LocalServer(app).start(timeout=60)


def test_jpeg_kept_for_the_policy_is_still_checked() -> None:
    jpeg = encode_jpeg(FRAMES["wrist"])
    kept = kept_jpeg(jpeg, "images.wrist", 10**6)
    assert kept is not None and kept.ndim == 1 and kept.tobytes() == jpeg
    with pytest.raises(PayloadTooLargeError, match="over the limit of 100"):
        kept_jpeg(jpeg, "images.wrist", 100)
    with pytest.raises(CodecError, match="truncated JPEG"):
        kept_jpeg(jpeg[:-200], "images.wrist", 10**6)
    grey = cv2.imencode(".jpg", FRAMES["wrist"][..., 0])[1].tobytes()
    assert kept_jpeg(grey, "images.wrist", 10**6) is None  # decoded at the entrypoint to RGB
    assert kept_jpeg({"b64_json": b64encode_text(jpeg)}, "f", 10**6) is not None
    with _serve("worker") as server:
        for frame, status in ((jpeg[:-200], 400), (grey, 200)):
            body = {
                "input": {"observation": {"images": {"wrist": {"b64_json": b64encode_text(frame)}}}}
            }
            reply = httpx.post(server.url + "/v1/actions/generations", json=body, timeout=30)
            assert reply.status_code == status, reply.text


def test_gpu_check_runs_its_cpu_half_and_says_when_there_is_no_cuda() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--repeat", "2"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if not torch.cuda.is_available():
        assert any(line.startswith("no CUDA here") for line in lines), done.stdout
    rows = {line.split()[0]: line.split() for line in lines if line.split()[:1] in (["1"], ["8"])}
    assert set(rows) == {"1", "8"}, done.stdout
    for cells in rows.values():
        assert float(cells[2]) > 0 and float(cells[4]) > 0  # CPU decode and inference ran
