"""The reference action server (extra ``server``): FastAPI entrypoint, policies, and the runners
that execute them (an inference worker process by default, a thread with ``in_process``).

Importing this package imports FastAPI and uvicorn; `vla_client` itself never does.
"""

from vla_client.server.app import create_app
from vla_client.server.config import ServerConfig
from vla_client.server.inference import Runner, ThreadRunner
from vla_client.server.local import LocalServer
from vla_client.server.policies import POLICIES, ReferencePolicy, make_policy
from vla_client.server.policy import Policy, PolicyInput, PolicySpec, metadata_document

__all__ = [
    "POLICIES",
    "LocalServer",
    "Policy",
    "PolicyInput",
    "PolicySpec",
    "ReferencePolicy",
    "Runner",
    "ServerConfig",
    "ThreadRunner",
    "create_app",
    "make_policy",
    "metadata_document",
]
