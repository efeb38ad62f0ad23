"""The policy's trip to the worker process: the one place the server pickles anything.

The entrypoint builds the policy (its settings: a few numbers, names and paths) and the worker,
a fresh interpreter, needs the same object. It travels pickled, over the private pipe between
the two processes, never from a socket a client can reach: request bodies are never unpickled
anywhere (msgpack and JSON only).

cloudpickle does the packing. It pickles a class that can be imported by reference, exactly as
`pickle` does (the worker imports its module, with the entrypoint's ``sys.path``), and a class
that cannot be imported by value: a `Policy` subclass defined in the script being run
(``python script.py``) or in a notebook cell lives in ``__main__``, which in the worker is
another module, so only its code, carried along, can rebuild it there. Lambdas and closures
(an `OpenpiPolicy` factory written inline) travel the same way.

What a policy must satisfy to travel: everything it holds before ``load()`` must pickle. Open
files, sockets, locks, threads, CUDA tensors and other handles to the process do not (and would
mean nothing in another process): open them in ``load()``, which runs in the worker, or leave
them out of the pickled state with ``__getstate__``.
"""

from __future__ import annotations

import pickle

import cloudpickle

from vla_client.errors import WorkerStartError
from vla_client.server.policy import Policy


def pack_policy(policy: Policy) -> bytes:
    """`policy` as bytes for the worker; `WorkerStartError` saying why it cannot travel."""
    try:
        return bytes(cloudpickle.dumps(policy))
    except Exception as exc:
        raise WorkerStartError(
            f"the policy cannot be sent to the worker process ({type(exc).__name__}: "
            f"{_first_line(exc)}); open files, sockets and devices in load(), which runs there"
        ) from exc


def unpack_policy(packed: bytes) -> Policy:
    """The worker's side of `pack_policy`: only ever called on what the entrypoint sent.

    Plain `pickle` reads cloudpickle's output (it needs cloudpickle importable, which the
    ``server`` extra guarantees). Raises what unpickling raises; `TypeError` if it is no policy.
    """
    policy = pickle.loads(packed)  # bytes from the starter's private pipe, never a client
    if not isinstance(policy, Policy):
        raise TypeError(f"the worker was sent a {type(policy).__name__}, not a Policy")
    return policy


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""
