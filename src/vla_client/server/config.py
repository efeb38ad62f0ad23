"""Server settings, with safe defaults: loopback only, bounded bodies, images and cameras.

`api_key` None means no authentication, which is only sensible on loopback; the CLI warns when
it binds another interface without one. The timeouts bound how long a client may hold a
connection without making progress (see docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vla_client.protocol import DecodeLimits

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


@dataclass(frozen=True)
class WorkerSettings:
    """How requests are batched for the inference worker, and how many may wait."""

    max_batch: int = 8
    batch_wait_ms: float = 0.0
    queue_size: int = 32
    inference_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not 1 <= self.max_batch <= 256:
            raise ValueError(f"max_batch must be in 1..256, got {self.max_batch}")
        if not 0 <= self.batch_wait_ms <= 1000:
            raise ValueError(f"batch_wait_ms must be in 0..1000, got {self.batch_wait_ms}")
        if not 1 <= self.queue_size <= 4096:
            raise ValueError(f"queue_size must be in 1..4096, got {self.queue_size}")
        if not self.inference_timeout_s > 0:
            raise ValueError("inference_timeout_s must be positive")


@dataclass(frozen=True)
class ServerConfig:
    """How the reference server listens and what it accepts."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    model_name: str = "vla-client-reference"
    max_body_bytes: int = 64 * 1024 * 1024
    limits: DecodeLimits = field(default_factory=DecodeLimits)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    # True runs the policy in a thread of the entrypoint instead of a worker process.
    in_process: bool = False
    api_key: str | None = field(default=None, repr=False)
    body_timeout_s: float = 30.0
    infer_timeout_s: float = 60.0
    idle_timeout_s: int = 5
    max_ws_message_bytes: int = 64 * 1024 * 1024
    max_connections: int | None = 256


def uvicorn_options(config: ServerConfig) -> dict[str, Any]:
    """The uvicorn settings that enforce `config`'s connection limits.

    HTTP is parsed by h11 even where httptools is installed: httptools puts no bound on header
    size, h11 refuses headers past 16 KiB. The event loop is uvloop where it is installed (the
    ``server`` extra installs it on Linux and macOS), as in SGLang.

    Websockets never negotiate permessage-deflate: the messages are camera frames and action
    arrays, which barely compress, and a client left at its library's defaults (``websockets``
    offers deflate unless told ``compression=None``) would otherwise pay for deflating megabytes
    of pixels on both sides, about 40x the round trip of the same client without it.
    """
    return {
        "http": "h11",
        "timeout_keep_alive": config.idle_timeout_s,
        "ws_max_size": config.max_ws_message_bytes,
        "ws_per_message_deflate": False,
        "limit_concurrency": config.max_connections,
        "server_header": False,
    }
