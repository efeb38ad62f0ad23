"""The reference policy with a fixed cost per forward pass, as a GPU has: batching then matters.

    vla-client serve --policy forward_cost_policy:ForwardCostPolicy \
        --policy-option forward_ms=20                 # run from benchmarks/

A GPU runs a batch of 8 in about the time it runs one (until the batch fills the device), so a
server that batches serves several robots for the price of one forward pass. The reference
policy costs about a millisecond per observation on the CPU, which hides that. This one waits
`forward_ms` once per `infer_batch` call (a sleep: the CPU is free meanwhile, as it is while a
GPU computes), then computes each observation's reference chunk, so a batch of B costs
``forward_ms`` plus B reference chunks. `benchmarks/bench_throughput.py` serves it with
``--max-batch 1`` and with batching on, to show what batching buys.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from vla_client.server.policies.reference import ReferencePolicy
from vla_client.server.policy import PolicyInput


class ForwardCostPolicy(ReferencePolicy):
    """`ReferencePolicy` plus `forward_ms` of waiting per policy call (0 < forward_ms <= 10 s)."""

    def __init__(self, *, forward_ms: float = 20.0, **options: object) -> None:
        if not (isinstance(forward_ms, (int, float)) and math.isfinite(forward_ms)):
            raise ValueError(f"forward_ms must be a finite number of ms, got {forward_ms!r}")
        if not 0 < forward_ms <= 10_000:
            raise ValueError(f"forward_ms must be in (0, 10000], got {forward_ms:g}")
        super().__init__(**options)  # type: ignore[arg-type]
        self.forward_ms = float(forward_ms)

    def infer_batch(self, observations: Sequence[PolicyInput]) -> list[np.ndarray]:
        time.sleep(self.forward_ms / 1000)
        return [self.infer(observation) for observation in observations]
