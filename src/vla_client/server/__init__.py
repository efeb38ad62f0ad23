"""The reference action server (extra ``server``): FastAPI entrypoint, policies, and the runners
that execute them (an inference worker process by default, a thread with ``in_process``).

Besides the server's parts, it offers the names only a server needs: `decode_request` and
`DecodedRequest` (the entrypoint's side of the wire) and the errors raised while serving
(`InferenceError`, `WorkerStartError`, `PolicyLoadError`, `PolicyStartError`,
`PolicyOutputError`) and the one a policy raises to refuse an observation it cannot read
(`PolicyInputError`, answered 400 with its message). Its names load on first use:
`create_app` imports FastAPI and uvicorn; `vla_client` itself never does.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.errors import InferenceError as InferenceError
    from vla_client.errors import PolicyInputError as PolicyInputError
    from vla_client.errors import PolicyLoadError as PolicyLoadError
    from vla_client.errors import PolicyOutputError as PolicyOutputError
    from vla_client.errors import PolicyStartError as PolicyStartError
    from vla_client.errors import WorkerStartError as WorkerStartError
    from vla_client.server.app import create_app as create_app
    from vla_client.server.config import ServerConfig as ServerConfig
    from vla_client.server.engine.inference import Runner as Runner
    from vla_client.server.engine.inference import ThreadRunner as ThreadRunner
    from vla_client.server.local import LocalServer as LocalServer
    from vla_client.server.policies.builtin import POLICIES as POLICIES
    from vla_client.server.policies.builtin import make_policy as make_policy
    from vla_client.server.policies.reference import ReferencePolicy as ReferencePolicy
    from vla_client.server.policy import Policy as Policy
    from vla_client.server.policy import PolicyInput as PolicyInput
    from vla_client.server.policy import PolicySpec as PolicySpec
    from vla_client.server.policy import metadata_document as metadata_document
    from vla_client.server.wire.decode import DecodedRequest as DecodedRequest
    from vla_client.server.wire.decode import decode_request as decode_request

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "InferenceError": "vla_client.errors",
    "PolicyInputError": "vla_client.errors",
    "PolicyLoadError": "vla_client.errors",
    "PolicyOutputError": "vla_client.errors",
    "PolicyStartError": "vla_client.errors",
    "WorkerStartError": "vla_client.errors",
    "DecodedRequest": "vla_client.server.wire.decode",
    "decode_request": "vla_client.server.wire.decode",
    "create_app": "vla_client.server.app",
    "ServerConfig": "vla_client.server.config",
    "Runner": "vla_client.server.engine.inference",
    "ThreadRunner": "vla_client.server.engine.inference",
    "LocalServer": "vla_client.server.local",
    "POLICIES": "vla_client.server.policies.builtin",
    "ReferencePolicy": "vla_client.server.policies.reference",
    "make_policy": "vla_client.server.policies.builtin",
    "Policy": "vla_client.server.policy",
    "PolicyInput": "vla_client.server.policy",
    "PolicySpec": "vla_client.server.policy",
    "metadata_document": "vla_client.server.policy",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)
