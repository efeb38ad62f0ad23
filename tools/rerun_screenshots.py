"""Make the Rerun screenshots of docs/rerun.md: real runs logged to .rrd files, each opened in
the real Rerun viewer and captured with its own ``--screenshot-to``.

The viewer needs a display and a GPU; on a headless Linux machine it runs under Xvfb with
Mesa's software Vulkan driver (lavapipe)::

    apt-get install xvfb mesa-vulkan-drivers
    PYTHONPATH=src python tools/rerun_screenshots.py            # writes docs/img/rerun-*.png

(Mesa's OpenGL driver, llvmpipe, cannot: it lacks the R32Float render target the viewer needs.)
Two runs: ``vla-client eval`` with a 150 ms delay, blended chunks and a watchdog (plans, seams,
latency and events), and ``vla-client send --bag`` replaying a ROS 2 bag written by `rosbags`
(the frames as sent and the joint states).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the bag writer the tests use

from ros_bags import write_bag  # noqa: E402
from vla_client.cameras.scene import SyntheticScene  # noqa: E402
from vla_client.cli import main  # noqa: E402
from vla_client.server import LocalServer, ReferencePolicy, create_app  # noqa: E402

IMAGES = ROOT / "docs" / "img"
WIDTH = 1400
"""Width of the saved screenshots (the viewer renders at twice this: pixels per point 2)."""


def eval_run(folder: Path) -> Path:
    out = folder / "eval.rrd"
    main(["eval", "--episodes", "1", "--max-steps", "60", "--mode", "blended", "--delay-ms",
          "150", "--watchdog", "0.25", "--rerun", str(out)])  # fmt: skip
    return out


def bag_run(folder: Path) -> Path:
    scene = SyntheticScene(240, 320, seed=4)
    stamps = [1_700_000_000.0 + i / 15 for i in range(45)]
    frames = [scene.render(i) for i in range(len(stamps))]
    joints = [np.sin(np.linspace(0, 3, 7) + t) for t in np.linspace(0, 2, 90)]
    joint_stamps = [stamps[0] - 0.01 + i / 30 for i in range(90)]
    bag = write_bag(
        folder / "episode", "mcap", {"/camera/image_raw": ("bgr8", frames, stamps)},
        ("/joint_states", joints, joint_stamps),
    )  # fmt: skip
    out = folder / "bag.rrd"
    with LocalServer(create_app(ReferencePolicy(action_horizon=10, action_dim=7))) as server:
        topics = ["--topic", "/camera/image_raw=wrist", "--topic", "/joint_states=state"]
        main(["send", server.url, "--bag", str(bag), *topics, "--rate", "recorded",
              "--rerun", str(out)])  # fmt: skip
    return out


def screenshot(rrd: Path, png: Path, port: int) -> None:
    """`rrd` in the Rerun viewer under Xvfb, captured to `png` at `WIDTH` pixels wide."""
    viewer = Path(sys.executable).with_name("rerun")
    raw = png.with_suffix(".raw.png")
    subprocess.run(
        ["xvfb-run", "-a", "-s", "-screen 0 6000x4000x24",  # the pointer, at the screen's
         str(viewer), str(rrd), "--renderer", "vulkan", "--port", str(port),  # centre, is off
         "--window-size", "1400x900", "--screenshot-to", str(raw)],  # the window
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    picture = Image.open(raw)
    height = round(picture.height * WIDTH / picture.width)
    picture.resize((WIDTH, height), Image.Resampling.LANCZOS).save(png, optimize=True)
    raw.unlink()


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vla-rerun-shots-") as scratch:
        folder = Path(scratch)
        screenshot(eval_run(folder), IMAGES / "rerun-eval.png", 9901)
        screenshot(bag_run(folder), IMAGES / "rerun-bag.png", 9902)
    print(f"wrote {IMAGES / 'rerun-eval.png'} and {IMAGES / 'rerun-bag.png'}")


if __name__ == "__main__":
    main_()
