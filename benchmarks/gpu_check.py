"""Check the GPU path of the torch policy, and time it: 3 cameras of 360x640, batches of 1 and 8.

Per batch size, median milliseconds of `--repeat` runs:

- ``h2d_ms``: the batch's uint8 frames from pinned host memory to the device;
- ``decode_cpu_ms``: decoding the batch's JPEG frames on the CPU (OpenCV, as the entrypoint
  does, one frame after another), the baseline;
- ``decode_gpu_ms``: decoding them on the device (`vla_client.server.engine.device_decode`:
  torchvision's nvJPEG or nvImageCodec), frames already decoded there, no host copy;
- ``inference_ms``: `TorchCNNPolicy.infer_batch` on decoded frames, copies to the device
  included.

On a machine without CUDA it prints a ``no CUDA here`` line, then runs its CPU half (the CPU
decode and the policy on the CPU; ``-`` for the rest) and exits 0.

    PYTHONPATH=src python benchmarks/gpu_check.py --repeat 20
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from datetime import date
from typing import Any

import numpy as np

from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import decode_image_bytes, encode_jpeg
from vla_client.server.engine.device_decode import FrameDecoder, frame_decoder
from vla_client.server.policies import TorchCNNPolicy
from vla_client.server.policy import PolicyInput

CAMERAS = ("wrist", "left", "right")
HEIGHT, WIDTH = 360, 640
BATCHES = (1, 8)


def median_ms(run: Callable[[], object], repeat: int, sync: Callable[[], None]) -> float:
    """Median wall time of `run` (after one untimed run), `sync` waiting for the device."""
    run()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        sync()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def row(batch: int, policy: TorchCNNPolicy, device: Any, frames: dict[str, np.ndarray],
        jpegs: list[np.ndarray], decoder: FrameDecoder | None, repeat: int) -> str:  # fmt: skip
    """One line of the table: the figures for `batch` requests of every camera."""
    import torch

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    files = jpegs * batch
    cpu_decode = median_ms(lambda: [decode_image_bytes(f.tobytes()) for f in files], repeat, sync)
    inputs = [PolicyInput(images=dict(frames)) for _ in range(batch)]
    inference = median_ms(lambda: policy.infer_batch(inputs), repeat, sync)
    h2d = gpu_decode = "-"
    if decoder is not None:
        pinned = torch.from_numpy(np.stack(list(frames.values()) * batch)).pin_memory()
        h2d = f"{median_ms(lambda: pinned.to(device, non_blocking=True), repeat, sync):.2f}"
        gpu_decode = "n/a"  # no GPU decoder installed: pip install torchvision or nvimagecodec
        if decoder.path == "cuda":
            gpu_decode = f"{median_ms(lambda: decoder(files), repeat, sync):.2f}"
    return f"{batch:>5} {h2d:>8} {cpu_decode:>14.2f} {gpu_decode:>14} {inference:>13.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="runs per figure (default: 20)")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    frames = synthetic_frames(CAMERAS, HEIGHT, WIDTH, seed=1)
    jpegs = [np.frombuffer(encode_jpeg(frame), np.uint8) for frame in frames.values()]
    policy = TorchCNNPolicy(device=str(device))
    policy.load()
    print(
        f"gpu_check {date.today()}, {platform.node()}, torch {torch.__version__}, "
        f"{len(CAMERAS)} cameras {HEIGHT}x{WIDTH}, median of {args.repeat} runs"
    )
    decoder = None
    if cuda:
        decoder = frame_decoder(device)
        print(f"device {torch.cuda.get_device_name(device)}; JPEG decoder on it: {decoder.path}")
    else:
        print("no CUDA here: only the CPU half runs (CPU decode, the policy on the CPU)")
    print(f"{'batch':>5} {'h2d_ms':>8} {'decode_cpu_ms':>14} {'decode_gpu_ms':>14} "
          f"{'inference_ms':>13}")  # fmt: skip
    for batch in BATCHES:
        print(row(batch, policy, device, frames, jpegs, decoder, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
