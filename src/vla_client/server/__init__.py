"""The reference action server (extra ``server``): FastAPI entrypoint, policies, and the runners
that execute them (an inference worker process by default, a thread with ``in_process``).

Importing this package imports FastAPI and uvicorn; `vla_client` itself never does.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.server.app import create_app as create_app
    from vla_client.server.config import ServerConfig as ServerConfig
    from vla_client.server.inference import Runner as Runner
    from vla_client.server.inference import ThreadRunner as ThreadRunner
    from vla_client.server.local import LocalServer as LocalServer
    from vla_client.server.policies import POLICIES as POLICIES
    from vla_client.server.policies import ReferencePolicy as ReferencePolicy
    from vla_client.server.policies import make_policy as make_policy
    from vla_client.server.policy import Policy as Policy
    from vla_client.server.policy import PolicyInput as PolicyInput
    from vla_client.server.policy import PolicySpec as PolicySpec
    from vla_client.server.policy import metadata_document as metadata_document

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
