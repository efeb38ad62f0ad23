"""The worker layout: an inference process fed through shared memory by the HTTP entrypoint.

::

    uvicorn entrypoint (event loop)                  inference worker (spawned process)
    decode body -> arrays
    copy arrays into a shared-memory slot  --Batch-->  map slots, PolicyInput views
    batch queue (bounded by the slot pool)            policy.infer_batch(batch)
    wake requests, read actions from slots <--Done--  write chunks into the slots

Only small records (array layouts, task text, parameters) go through the pipe. One worker can
serve several entrypoint processes (`vla_client.server.api_servers`): each has its own slots
and pipe, and the worker merges their waiting batches into one policy call.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.errors import WorkerStartError as WorkerStartError
    from vla_client.server.worker.dispatch import WorkerRunner as WorkerRunner
    from vla_client.server.worker.shm import SEGMENT_PREFIX as SEGMENT_PREFIX

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "WorkerStartError": "vla_client.errors",
    "WorkerRunner": "vla_client.server.worker.dispatch",
    "SEGMENT_PREFIX": "vla_client.server.worker.shm",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)
