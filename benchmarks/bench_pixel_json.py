"""Time decoding a pixel-list JSON body: json.loads + pixel_list_to_array vs extract_pixel_lists.

The body is what an old robot client sends: each camera as ``image.tolist()`` inside
``json.dumps({"input": {"observation": {"images": {...}}}})``. Both paths end with the same uint8
arrays (checked before timing). Each timing is the median of `--repeat` runs, with gc.collect()
before each run and gc left on, since a server decodes with gc on too.

    PYTHONPATH=src python benchmarks/bench_pixel_json.py --repeat 9
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs.arrays import pixel_list_to_array
from vla_client.codecs.pixel_json import extract_pixel_lists, restore_placeholders


def baseline(body: bytes) -> dict[str, Any]:
    obj = json.loads(body)
    images = obj["input"]["observation"]["images"]
    return {name: pixel_list_to_array(value) for name, value in images.items()}


def fast(body: bytes) -> dict[str, Any]:
    new, arrays = extract_pixel_lists(body)
    obj = restore_placeholders(orjson.loads(new), arrays)
    images: dict[str, Any] = obj["input"]["observation"]["images"]
    return images


def median_ms(fn: Callable[[bytes], object], body: bytes, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn(body)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per path (median)")
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--cameras", type=int, default=3)
    parser.add_argument("--compact", action="store_true", help='json.dumps separators (",", ":")')
    args = parser.parse_args()

    frames = synthetic_frames(args.cameras, args.height, args.width)
    obj = {"input": {"observation": {"images": {k: v.tolist() for k, v in frames.items()}}}}
    separators = (",", ":") if args.compact else None
    body = json.dumps(obj, separators=separators).encode()

    want, got = baseline(body), fast(body)
    for name, frame in frames.items():
        for result in (want[name], got[name]):
            assert isinstance(result, np.ndarray) and result.dtype == np.uint8
            assert np.array_equal(result, frame), name

    a = median_ms(baseline, body, args.repeat)
    b = median_ms(fast, body, args.repeat)
    print(
        f"body: {len(body) / 1e6:.2f} MB, {args.cameras} cameras {args.height}x{args.width}x3,"
        f" median of {args.repeat}"
    )
    print(f"{'path':<48}{'ms':>10}")
    print(f"{'(a) json.loads + pixel_list_to_array':<48}{a:>10.1f}")
    print(f"{'(b) extract_pixel_lists + orjson + restore':<48}{b:>10.1f}")
    print(f"ratio b/a: {b / a:.3f}")


if __name__ == "__main__":
    main()
