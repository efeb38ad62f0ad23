"""Where the action API lives: its paths, its websocket URLs and how a key is presented.

Four routes make the API. Over HTTP, ``POST /v1/actions/generations`` takes one request and
answers with its action chunk, and ``GET /v1/actions/metadata`` describes the policy. Two
websockets keep a connection open instead: ``/v1/actions/realtime`` takes the same request
documents as HTTP, and ``/openpi/policy`` takes openpi's flat observation dicts. openpi's own
client connects to ``/`` unless given a path, so a server speaking openpi answers there too.

Two endpoints are not the action API's: ``gr00t``, NVIDIA Isaac GR00T's policy server, which
listens for ZeroMQ requests at ``tcp://host:5555`` (`vla_client.protocol.families.gr00t`), and
``vllm_omni``, vLLM-Omni's robot websocket at ``/v1/realtime/robot/openpi``
(`vla_client.protocol.families.vllm_omni`); and ``roboarena``, RoboArena's policy server, which
takes its requests on any path (`vla_client.protocol.families.roboarena`): name it with
``endpoint``.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from vla_client.validation import check_choice

GENERATIONS_PATH = "/v1/actions/generations"
METADATA_PATH = "/v1/actions/metadata"
HEALTH_PATH = "/health"

Endpoint = Literal["realtime", "openpi", "gr00t", "vllm_omni", "roboarena"]
ENDPOINTS: tuple[Endpoint, ...] = ("realtime", "openpi", "gr00t", "vllm_omni", "roboarena")
ENDPOINT_PATHS: dict[Endpoint, str] = {
    "realtime": "/v1/actions/realtime",
    "openpi": "/openpi/policy",
    "vllm_omni": "/v1/realtime/robot/openpi",
}
OPENPI_ROOT_PATH = "/"


def check_endpoint(endpoint: str) -> Endpoint:
    """`endpoint` itself when it names a websocket endpoint, else `ValueError` naming them."""
    check_choice("endpoint", endpoint, ENDPOINTS)
    return endpoint  # type: ignore[return-value]


def websocket_url(base_url: str, endpoint: Endpoint | None = None) -> tuple[str, Endpoint]:
    """The ``ws(s)://`` URL to open and the endpoint it speaks.

    ``http(s)`` becomes ``ws(s)``. A URL already ending in an endpoint's path is used as given
    (and names the endpoint); otherwise `endpoint`'s path (realtime by default) is appended.
    """
    if endpoint is not None:
        check_endpoint(endpoint)
    if endpoint == "gr00t":
        raise ValueError("GR00T's server speaks ZeroMQ, not websockets: use tcp://host:5555")
    parts = urlsplit(base_url)
    scheme = _websocket_scheme(parts.scheme, base_url)
    path = parts.path.rstrip("/")
    named = _endpoint_in_path(path, endpoint)
    if named is not None:
        return urlunsplit((scheme, parts.netloc, path, parts.query, "")), named
    chosen: Endpoint = endpoint or "realtime"
    if chosen == "roboarena":  # any path: the URL as given
        return urlunsplit((scheme, parts.netloc, path or "/", parts.query, "")), chosen
    url = urlunsplit((scheme, parts.netloc, path + ENDPOINT_PATHS[chosen], parts.query, ""))
    return url, chosen


def _endpoint_in_path(path: str, endpoint: Endpoint | None) -> Endpoint | None:
    """The endpoint whose path `path` ends in (None: none), which must be `endpoint` if one
    is given."""
    named = [name for name, known in ENDPOINT_PATHS.items() if path.endswith(known)]
    if not named:
        return None
    if endpoint is not None and endpoint != named[0]:
        raise ValueError(f"URL path {path!r} is the {named[0]} endpoint, not {endpoint}")
    return named[0]


def _websocket_scheme(scheme: str, base_url: str) -> str:
    """``ws`` or ``wss`` for a URL's `scheme` (``http(s)`` becomes ``ws(s)``)."""
    scheme = {"http": "ws", "https": "wss"}.get(scheme, scheme)
    if scheme not in ("ws", "wss"):
        raise ValueError(f"a websocket URL needs ws(s):// or http(s)://, got {base_url!r}")
    return scheme


API_KEY_ENV = "VLA_CLIENT_API_KEY"
"""The environment variable both ends read their API key from when given none: a client
(`ActionClient`, every ``vla-client`` command) sends it, ``vla-client serve`` requires it. The
key stays out of the command line and out of ``ps``."""


def auth_headers(api_key: str | None, endpoint: Endpoint | None = None) -> dict[str, str]:
    """The ``Authorization`` header for `api_key`, or nothing without a key.

    SGLang's ``--api-key`` expects ``Bearer <key>``; openpi's websocket client sends
    ``Api-Key <key>``, so that form is used on the openpi endpoint.
    """
    if not api_key:
        return {}
    scheme = "Api-Key" if endpoint == "openpi" else "Bearer"
    return {"Authorization": f"{scheme} {api_key}"}
