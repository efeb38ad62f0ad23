"""A robot's loop over ``ipc://`` for the crash tests: ``python ipc_client_loop.py PATH``.

Prints ``ready`` after its first reply, then sends requests until it is killed.
"""

from __future__ import annotations

import sys

import numpy as np

from vla_client import ActionClient, Observation

frames = {name: np.full((360, 640, 3), 7, np.uint8) for name in "abc"}
observation = Observation(frames, state=np.zeros(7, np.float32), task="crash")
with ActionClient(f"ipc://{sys.argv[1]}", timeout_s=30) as client:
    client.infer(observation)
    print("ready", flush=True)
    while True:
        client.infer(observation)
