"""Server settings, with safe defaults: loopback only, bounded bodies, images and cameras."""

from __future__ import annotations

from dataclasses import dataclass, field

from vla_client.protocol import DecodeLimits

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


@dataclass(frozen=True)
class ServerConfig:
    """How the reference server listens and what it accepts."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    model_name: str = "vla-client-reference"
    max_body_bytes: int = 64 * 1024 * 1024
    limits: DecodeLimits = field(default_factory=DecodeLimits)
