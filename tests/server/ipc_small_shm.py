"""Run inside a small private ``/dev/shm`` by test_ipc_short_shm.py: a server on ``ipc://`` and
its client in one process (they must share /dev/shm), frames too big for it, then frames that
fit only once the room another holds is given back. Prints one JSON line of what each got.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np

from vla_client import ActionClient, Observation
from vla_client.errors import ServerError
from vla_client.segments import Segment, client_segment_name
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.transports import NO_RETRY

MIB = 1 << 20


def frames(side: int) -> Observation:
    return Observation({n: np.full((side, side, 3), 5, np.uint8) for n in "abc"}, task="short")


def outcome(client: ActionClient, observation: Observation) -> dict[str, object]:
    try:
        return {"status": 200, "shape": list(client.infer(observation).actions.shape)}
    except ServerError as exc:
        return {"status": exc.status_code, "retry_after": exc.retry_after, "detail": exc.detail}


path = os.path.join(tempfile.mkdtemp(), "s.sock")
report: dict[str, object] = {}
with (
    LocalServer(create_app(ReferencePolicy(), ServerConfig(port=0, ipc_path=path))),
    ActionClient(f"ipc://{path}", retry=NO_RETRY) as client,
):
    report["too big"] = outcome(client, frames(1100))  # 3 x 3.5 MiB > 8 MiB in all
    hog = Segment.create(client_segment_name("hog", 1), 6 * MIB)  # leaves ~2 MiB free
    report["short"] = outcome(client, frames(600))  # 3 x 1 MiB: fits once the hog goes
    hog.unlink()
    hog.close()
    report["after"] = outcome(client, frames(600))
print(json.dumps(report), flush=True)
sys.exit(0)
