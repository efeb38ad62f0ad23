"""Train the reach task's flow policy (`reach_flow`) from scripted demonstrations.

    python tools/train_reach_flow.py [--out FILE.npz] [--seed 0]

The demonstrations are scripted, drawn from the task's geometry rather than rendered: for a
distance to the target (in metres; a third of them close, where precision matters), the
scripted robot swings out to a side chosen at random, by an amount drawn up to `MAX_SWING_M`
that decays by ``exp(-1 / DECAY_STEPS)`` a step (leaning forward or back by up to
`MAX_TURN_RAD`, and aiming up to `MAX_LEAD_M` ahead or behind), and less the closer it is
(the swing by the squared distance over `FULL_SWING_M`, the lead by the distance). The decay
makes the rows a chunk has left a chunk the policy could give later: what real-time
chunking continues must be one of the policy's own ways to the target. The network
learns that distribution by flow matching: for noise ``x0``, a demonstration ``x1`` and a time
tau, it predicts ``x1`` from ``tau x1 + (1 - tau) x0`` (the policy takes its velocity from that
prediction, which keeps the regression target bounded where a point-like distribution, such
as "no swing" close to the target, makes the velocity itself steep). Fresh demonstrations are
drawn for every batch, everything from one seeded generator, in float64 on numpy alone: the
same seed gives the same weights (to float rounding) in about 20 s on an idle CPU. Without
``--out`` it writes the weights the package ships (`vla_client.server.policies.reach_flow`'s
`WEIGHTS`); a script, not part of the package, like the other tools here.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from vla_client.server.policies import mlp
from vla_client.server.policies.reach_flow import (
    DISTANCE_SCALE_STEPS,
    HORIZON,
    RESIDUAL_SCALE_M,
    WEIGHTS,
)
from vla_client.tasks.reach import ReachSettings

MAX_SWING_M = 0.1
DECAY_STEPS = 8.0
FULL_SWING_M = 0.15
"""Closer than this, the swing shrinks with the squared distance, so the robot holds still
on the target."""
MAX_TURN_RAD = 0.5
"""The swing leans forward or back by up to this angle: a robot that has swung out sees the line
to the target turned, and the chunk it is executing must still be one this policy could give."""
MAX_LEAD_M = 0.05
"""The scripted robot also aims up to this far ahead of or behind where the target will be,
decaying as the swing does: a chunk planned from an older estimate of the target's motion is
still one of the policy's own."""
SLACK_M = 0.006
"""And by a small offset in any direction (this standard deviation per axis), however close:
where the line to the target is no direction at all, a chunk planned a moment ago still fits."""
MAX_DISTANCE_M = 0.6
CLOSE_M = 0.06
CLOSE_SHARE = 1 / 3
HIDDEN = 128
STEPS = 3000
BATCH = 256
LEARNING_RATE = 2e-3


def demonstrations(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` scripted chunks ``[N, H, 2]`` in policy units and their distance features."""
    step_m = ReachSettings().max_speed_mps / 10.0  # the policy's units are steps at 10 Hz
    close = rng.random(count) < CLOSE_SHARE
    distance = np.where(
        close, rng.uniform(0, CLOSE_M, count), rng.uniform(0, MAX_DISTANCE_M, count)
    )
    side = rng.choice([-1.0, 1.0], count)
    size = side * rng.uniform(0, MAX_SWING_M, count) * np.minimum(1, distance / FULL_SWING_M) ** 2
    decay = np.exp(-np.arange(1, HORIZON + 1) / DECAY_STEPS)
    swing = size[:, None] * decay[None, :]
    turn = rng.uniform(-MAX_TURN_RAD, MAX_TURN_RAD, count)[:, None]
    lead = rng.uniform(-MAX_LEAD_M, MAX_LEAD_M, count) * np.minimum(1, distance / FULL_SWING_M)
    lead = lead[:, None] * decay[None, :]
    chunks = np.stack([swing * np.sin(turn) + lead, swing * np.cos(turn)], axis=-1)
    slack = rng.normal(0, SLACK_M, (count, 1, 2)) * decay[None, :, None]
    chunks = chunks + slack
    return chunks / RESIDUAL_SCALE_M, distance / step_m / DISTANCE_SCALE_STEPS


def train(seed: int = 0, steps: int = STEPS) -> mlp.Weights:
    """The network's weights, trained from `seed`."""
    rng = np.random.default_rng(seed)
    size = HORIZON * 2
    weights = {
        name: value.astype(np.float64)
        for name, value in mlp.init_weights([size + 2, HIDDEN, HIDDEN, size], rng).items()
    }
    optimiser = mlp.Adam(weights, LEARNING_RATE)
    for index in range(steps):
        chunks, features = demonstrations(rng, BATCH)
        noise = rng.standard_normal(chunks.shape)
        tau = rng.random(BATCH)
        x = tau[:, None, None] * chunks + (1 - tau[:, None, None]) * noise
        inputs = np.concatenate([x.reshape(BATCH, -1), features[:, None], tau[:, None]], axis=1)
        output, activations = mlp.forward(weights, inputs)
        error = output - chunks.reshape(BATCH, -1)
        grads, _ = mlp.backward(weights, activations, 2 * error / error.size)
        optimiser.learning_rate = LEARNING_RATE * (1 - index / steps)  # linear decay to 0
        optimiser.step(weights, grads)
    return {name: value.astype(np.float32) for name, value in weights.items()}


def save(weights: mlp.Weights, path: Path) -> None:
    """Write `weights` as an ``.npz`` `ReachFlowPolicy` reads."""
    np.savez(path, **weights)  # type: ignore[arg-type]  # numpy's stub reads a key as an option


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS, help="the .npz to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    weights = train(args.seed, args.steps)
    save(weights, args.out)
    print(f"wrote {args.out} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
