"""What recording a request costs the request path, and how fast the recorder writes.

`RequestRecorder.record` (queue the arrays, return) against a baseline of recording on the
request path: `encode_step` (PNG or raw) plus the write. Then the recorder's own throughput: how
many requests per second its thread writes, which says how far a server can go before requests
are dropped. Full-size frames (3 cameras, 360x640) by default; each figure is a median of
`--repeat` runs.

    PYTHONPATH=src python benchmarks/bench_recorder.py --repeat 50
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.recording import ImageFormat, ObservationWriter, ServedRequest, encode_step
from vla_client.server.recorder import RequestRecorder


def inline_ms(
    folder: Path, frames: dict[str, np.ndarray], image_format: ImageFormat, repeat: int
) -> float:
    """Median ms to encode and write one request on the calling thread."""
    served = ServedRequest(np.zeros((16, 7), np.float32), {}, {"inference_ms": 1.0})
    times = []
    with ObservationWriter(
        folder / f"inline-{image_format}.vlaobs", image_format=image_format
    ) as w:
        for _ in range(repeat):
            start = time.perf_counter()
            w.append(encode_step(Observation(frames), image_format=image_format, served=served))
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def recorder_figures(
    folder: Path, frames: dict[str, np.ndarray], image_format: ImageFormat, repeat: int
) -> tuple[float, float]:
    """Median µs per `record` call, and requests per second the writer thread stores."""
    actions = np.zeros((16, 7), np.float32)
    calls = []
    recorder = RequestRecorder(folder / image_format, image_format=image_format, queue_size=repeat)
    start = time.perf_counter()
    for _ in range(repeat):
        begin = time.perf_counter()
        recorder.record(frames, None, "bench", {}, actions, {"inference_ms": 1.0})
        calls.append(time.perf_counter() - begin)
    recorder.close(timeout=600)
    elapsed = time.perf_counter() - start
    stats = recorder.stats()
    assert stats.recorded == repeat and stats.dropped == 0, stats
    return statistics.median(calls) * 1e6, repeat / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=30, help="requests per measurement")
    parser.add_argument("--cameras", type=int, default=3)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--width", type=int, default=640)
    args = parser.parse_args()
    frames = synthetic_frames(args.cameras, args.height, args.width)
    print(f"{time.strftime('%Y-%m-%d')}, {args.cameras} cameras {args.height}x{args.width}, "
          f"median of {args.repeat}")  # fmt: skip
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for image_format in ("png", "raw"):
            inline = inline_ms(folder, frames, image_format, args.repeat)
            call_us, rate = recorder_figures(folder, frames, image_format, args.repeat)
            print(
                f"{image_format}: record() {call_us:.1f} us vs inline encode+write {inline:.2f} ms "
                f"({inline * 1e3 / call_us:.0f}x less on the request path); "
                f"the writer stores {rate:.0f} requests/s"
            )


if __name__ == "__main__":
    main()
