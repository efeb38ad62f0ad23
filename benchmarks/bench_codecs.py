"""PNG and JPEG for 3 cameras: vla-client's codecs against sequential OpenCV, in one run.

    PYTHONPATH=src python benchmarks/bench_codecs.py [--repeats N]

The baseline is what a plain client does: ``cv2.imencode(".png")`` at compression level 1 (or
JPEG quality 90) and ``cv2.imdecode``, one camera after another. vla-client writes PNG with
fpng (OpenCV with tuned parameters where fpng is missing), reads it with its own ISA-L reader
where that applies, and runs the cameras through `map_frames`. Targets: PNG encode <= 0.4x the
baseline's time at <= 1.15x its size; decode <= 0.6x. Baseline and ours are timed in
alternation. `bench_fast_paths.py` compares the whole request paths with what they were.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np

from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import decode_image_bytes, encode_jpeg, encode_png, map_frames


def paired_median_ms(
    baseline: Callable[[], Any], ours: Callable[[], Any], repeats: int
) -> tuple[float, float]:
    """Median ms of each, timed in alternation so that a noisy neighbour slows both alike."""
    baseline()
    ours()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for function, into in ((baseline, samples[0]), (ours, samples[1])):
            start = time.perf_counter()
            function()
            into.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples[0]), statistics.median(samples[1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=60)
    args = parser.parse_args()
    frames = list(synthetic_frames(3, 360, 640).values())
    bgr = [cv2.cvtColor(frame, cv2.COLOR_RGB2BGR) for frame in frames]

    def sequential_encode(ext: str, params: list[int]) -> list[bytes]:
        return [cv2.imencode(ext, frame, params)[1].tobytes() for frame in bgr]

    rows = []
    for name, baseline, ours in [
        (
            "png",
            lambda: sequential_encode(".png", [cv2.IMWRITE_PNG_COMPRESSION, 1]),
            lambda: map_frames(encode_png, frames),
        ),
        (
            "jpeg q90",
            lambda: sequential_encode(".jpg", [cv2.IMWRITE_JPEG_QUALITY, 90]),
            lambda: map_frames(encode_jpeg, frames),
        ),
    ]:
        base_bytes = sum(len(b) for b in baseline())
        our_payloads = ours()
        our_bytes = sum(len(b) for b in our_payloads)
        encode = paired_median_ms(baseline, ours, args.repeats)
        base_payloads = baseline()
        decode = paired_median_ms(
            lambda p=base_payloads: [
                cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR) for b in p
            ],
            lambda p=our_payloads: map_frames(decode_image_bytes, p),
            args.repeats,
        )
        rows.append((name, encode, decode, base_bytes, our_bytes))
    print(f"3 cameras 360x640x3 uint8, median of {args.repeats} (ms)")
    print(
        f"{'codec':<10}{'enc seq':>9}{'enc ours':>9}{'ratio':>7}{'size ratio':>11}"
        f"{'dec seq':>9}{'dec ours':>9}{'ratio':>7}"
    )
    for name, (e0, e1), (d0, d1), b0, b1 in rows:
        print(
            f"{name:<10}{e0:9.2f}{e1:9.2f}{e1 / e0:7.2f}{b1 / b0:11.2f}"
            f"{d0:9.2f}{d1:9.2f}{d1 / d0:7.2f}"
        )
    print("targets (png): encode <= 0.40, size <= 1.15, decode <= 0.60")


if __name__ == "__main__":
    main()
