"""Server settings, with safe defaults: loopback only, bounded bodies, images and cameras.

`api_key` None means no authentication, which is only sensible on loopback; the CLI warns when
it binds another interface without one. An empty key is refused, not taken as "no key": it is
what an unset shell variable gives (``--api-key "$KEY"``), and reading it as "no key" would turn
authentication off without a word. The timeouts bound how long a client may hold a connection
without making progress (see docs/security.md).

Every setting is checked when the object is made: a value that cannot work (a port past 65535,
a body limit of 0, an empty key) is a `ValueError` naming the setting, before anything starts.
"""

from __future__ import annotations

import functools
import math
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vla_client.protocol import DecodeLimits, openpi_layout
from vla_client.server.edge.connections import HeaderDeadlineProtocol
from vla_client.server.worker.threads import check_torch_threads
from vla_client.validation import check_at_least, check_positive

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
_MIN_FILE_BYTES = 4096  # the least a recording file may be given (RequestRecorder's own bound)


@dataclass(frozen=True)
class WorkerSettings:
    """How requests are batched for the inference worker, and how many may wait.

    `torch_threads` is the worker's OpenMP (torch intra-op) thread count; None takes the
    user's ``OMP_NUM_THREADS``, else the usable cores less one per entrypoint process
    (`vla_client.server.worker.threads`). The worker's OpenMP threads sleep when idle
    (``OMP_WAIT_POLICY=PASSIVE``) unless ``OMP_WAIT_POLICY`` is set.
    """

    max_batch: int = 8
    batch_wait_ms: float = 0.0
    queue_size: int = 32
    inference_timeout_s: float = 60.0
    torch_threads: int | None = None

    def __post_init__(self) -> None:
        check_at_least("max_batch", self.max_batch, 1, integer=True)
        check_at_least("queue_size", self.queue_size, 1, integer=True)
        if not 1 <= self.max_batch <= 256:
            raise ValueError(f"max_batch must be in 1..256, got {self.max_batch}")
        if not 0 <= self.batch_wait_ms <= 1000:
            raise ValueError(f"batch_wait_ms must be in 0..1000, got {self.batch_wait_ms}")
        if not 1 <= self.queue_size <= 4096:
            raise ValueError(f"queue_size must be in 1..4096, got {self.queue_size}")
        check_positive("inference_timeout_s", self.inference_timeout_s)
        check_torch_threads("torch_threads", self.torch_threads)


@dataclass(frozen=True)
class RecordSettings:
    """Record every served request into `folder` (`vla_client.server.recorder.RequestRecorder`).

    The files together hold at most `max_bytes` and number at most `max_files`; past that the
    oldest file is deleted (a flight recorder). Each server process records on its own, into
    files named after its process id. A folder that cannot be written stops the recording,
    said once in the log; requests are still served.
    """

    folder: str
    max_bytes: int = 1 << 30
    max_files: int = 16

    def __post_init__(self) -> None:
        if not isinstance(self.folder, str) or not self.folder:
            raise ValueError(f"record folder must be a non-empty path; got {self.folder!r}")
        check_at_least("max_files", self.max_files, 1, integer=True)
        check_at_least("max_bytes", self.max_bytes, self.max_files * _MIN_FILE_BYTES, integer=True)


PROTOCOLS = ("gr00t", "vllm-omni", "roboarena")
"""The other server families' protocols the server can speak too (`ProtocolSettings`)."""
GR00T_DEFAULT_PORT = 5555
"""Where GR00T's clients look for its ZeroMQ server, and where the server binds it by default."""


@dataclass(frozen=True)
class ProtocolSettings:
    """Speak another server family's protocol too (`vla_client.server.edge.families`).

    `name` is one of `PROTOCOLS`. GR00T's protocol has a ZeroMQ socket of its own, bound on
    the server's host at `port` (None: 5555, GR00T's; 0: a free one, for tests). `state_split`
    names the parts GR00T's modality config announces for the state, each with its length, in
    the vector's order (None: one part, ``state``); `action_split` does the same for the actions
    of GR00T and vLLM-Omni, which answer per-key actions (None: GR00T's one key ``action``,
    vLLM-Omni's one array).
    """

    name: str
    port: int | None = None
    state_split: dict[str, int] | None = None
    action_split: dict[str, int] | None = None

    def __post_init__(self) -> None:
        if self.name not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}; got {self.name!r}")
        if self.port is not None:
            if self.name != "gr00t":
                raise ValueError(f"{self.name} is served on the server's own port; give no port")
            check_at_least("protocol port", self.port, 0, integer=True)
            if self.port > 65535:
                raise ValueError(f"protocol port must be in 0..65535; got {self.port}")
        if self.state_split is not None and self.name != "gr00t":
            raise ValueError(f"state_split is GR00T's; {self.name} takes the state as one vector")
        if self.action_split is not None and self.name == "roboarena":
            raise ValueError("action_split is for gr00t and vllm-omni; roboarena takes one chunk")
        for name in ("state_split", "action_split"):
            _check_split(name, getattr(self, name))

    @property
    def bound_port(self) -> int:
        """The port GR00T's socket binds: `port`, else GR00T's own."""
        return GR00T_DEFAULT_PORT if self.port is None else self.port


def _check_split(name: str, split: dict[str, int] | None) -> None:
    if split is None:
        return
    if not isinstance(split, dict) or not split:
        raise ValueError(f"{name} maps names to lengths; got {split!r}")
    for key, dim in split.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{name} keys are names; got {key!r}")
        check_at_least(f"{name}[{key!r}]", dim, 1, integer=True)


@dataclass(frozen=True)
class ServerConfig:
    """How the reference server listens and what it accepts."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    # The "model" of metadata and replies; None names it after the policy (its spec's family).
    model_name: str | None = None
    max_body_bytes: int = 64 * 1024 * 1024
    limits: DecodeLimits = field(default_factory=DecodeLimits)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    # True runs the policy in a thread of the entrypoint instead of a worker process.
    in_process: bool = False
    api_key: str | None = field(default=None, repr=False)
    # Request line and headers must arrive within this, from the connection's opening.
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    infer_timeout_s: float = 60.0
    idle_timeout_s: int = 5
    max_ws_message_bytes: int = 64 * 1024 * 1024
    max_connections: int | None = 256
    # The request layout the openpi websocket reads: flat, droid, libero or aloha.
    openpi_layout: str = "flat"
    # Record every served request (None: no recording).
    record: RecordSettings | None = None
    # Speak another server family's protocol too (None: only the action API and openpi's).
    protocol: ProtocolSettings | None = None
    # Tell the client a policy exception's message in its 500, not only its type: for a server
    # whose clients are its policy's author (`vla-client serve` on loopback turns it on).
    send_policy_errors: bool = False
    # A Unix socket to serve ipc:// clients on, beside the port (None: none).
    ipc_path: str | None = None

    def __post_init__(self) -> None:
        self._check_address()
        if self.model_name is not None and (
            not isinstance(self.model_name, str) or not self.model_name
        ):
            raise ValueError(f"model_name must be a non-empty string; got {self.model_name!r}")
        self._check_bounds()
        self._check_decode_limits()
        self._check_where_policy_runs()
        check_api_key_setting(self.api_key)
        openpi_layout(self.openpi_layout)  # raises ValueError naming the layouts
        self._check_optional_parts()

    def _check_address(self) -> None:
        """The interface and port it listens on."""
        if not isinstance(self.host, str) or not self.host:
            raise ValueError(f"host must be an interface name or address; got {self.host!r}")
        # 0 lets the OS pick a free port: for a server handed its own socket (LocalServer, the
        # benchmarks); the CLI refuses it, since no robot could find such a server.
        check_at_least("port", self.port, 0, integer=True)
        if self.port > 65535:
            raise ValueError(f"port must be in 0..65535; got {self.port}")

    def _check_bounds(self) -> None:
        """The sizes, connection count and deadlines that bound what a client may send."""
        for option in ("max_body_bytes", "max_ws_message_bytes", "idle_timeout_s"):
            check_positive(option, getattr(self, option), integer=True)
        check_positive("max_connections", self.max_connections, allow_none=True, integer=True)
        for option in ("header_timeout_s", "body_timeout_s", "infer_timeout_s"):
            check_positive(option, getattr(self, option))
        if not math.isfinite(self.header_timeout_s):  # a deadline, which infinity is not
            raise ValueError(f"header_timeout_s must be finite; got {self.header_timeout_s}")

    def _check_decode_limits(self) -> None:
        """The cameras and pixels a request may carry."""
        if not isinstance(self.limits, DecodeLimits):
            raise ValueError(f"limits must be a DecodeLimits; got {self.limits!r}")
        check_positive("limits.max_cameras", self.limits.max_cameras, integer=True)
        check_positive("limits.max_image_pixels", self.limits.max_image_pixels, integer=True)

    def _check_where_policy_runs(self) -> None:
        """The worker's settings, the two switches, and that a thread has no worker's threads."""
        if not isinstance(self.worker, WorkerSettings):
            raise ValueError(f"worker must be a WorkerSettings; got {self.worker!r}")
        for option in ("in_process", "send_policy_errors"):
            if not isinstance(getattr(self, option), bool):
                raise ValueError(f"{option} must be True or False; got {getattr(self, option)!r}")
        if self.in_process and self.worker.torch_threads is not None:
            raise ValueError(
                "worker.torch_threads sets the worker process's threads; in_process has none"
            )

    def _check_optional_parts(self) -> None:
        """The parts a server may go without: the Unix socket, the recorder, another family."""
        if self.ipc_path is not None and (not isinstance(self.ipc_path, str) or not self.ipc_path):
            raise ValueError(f"ipc_path must be a socket path or None; got {self.ipc_path!r}")
        if self.record is not None and not isinstance(self.record, RecordSettings):
            raise ValueError(f"record must be a RecordSettings or None; got {self.record!r}")
        if self.protocol is not None and not isinstance(self.protocol, ProtocolSettings):
            raise ValueError(f"protocol must be a ProtocolSettings or None; got {self.protocol!r}")


def check_api_key_setting(key: str | None) -> None:
    """Raise `ValueError` for a key no client could send: empty, padded with spaces (a server
    strips what it reads), or with characters an HTTP header cannot carry."""
    if key is None:
        return
    if not isinstance(key, str) or not key:
        raise ValueError("api_key must not be empty (None means no key)")
    if key != key.strip() or not key.isascii() or not key.isprintable():
        raise ValueError("api_key must be printable ASCII without leading or trailing spaces")


def uvicorn_options(config: ServerConfig) -> dict[str, Any]:
    """The uvicorn settings that enforce `config`'s connection limits.

    HTTP is parsed by h11 even where httptools is installed: httptools puts no bound on header
    size, h11 refuses headers past 16 KiB. The protocol is uvicorn's h11 one with a deadline on
    the headers, a connection limit that only connections with a complete request count in, and
    bodies of declared length written straight into the buffer the app gives
    (`vla_client.server.edge.connections`). The event loop is uvloop where it is installed (the
    ``server`` extra installs it on Linux and macOS), as in SGLang.

    Websockets never negotiate permessage-deflate: the messages are camera frames and action
    arrays, which barely compress, and a client left at its library's defaults (``websockets``
    offers deflate unless told ``compression=None``) would otherwise pay for deflating megabytes
    of pixels on both sides, about 40x the round trip of the same client without it.
    """
    return {
        "http": functools.partial(HeaderDeadlineProtocol, header_timeout_s=config.header_timeout_s),
        "timeout_keep_alive": config.idle_timeout_s,
        "ws_max_size": config.max_ws_message_bytes,
        "ws_per_message_deflate": False,
        "limit_concurrency": config.max_connections,
        "server_header": False,
    }


def check_ipc_path(path: str) -> None:
    """`ValueError` naming `path` unless a socket can be made there: its folder exists and
    nothing is there but, at most, a stale socket (a killed server's, which is replaced)."""
    target = Path(path)
    if not target.parent.is_dir():
        raise ValueError(f"--ipc {path}: no folder {target.parent}; make it first")
    if target.exists() or target.is_symlink():
        if not target.is_socket():
            raise ValueError(f"--ipc {path}: the path exists and is not a socket; choose another")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            pass  # stale
        else:
            raise ValueError(f"--ipc {path}: another server listens there")
        finally:
            probe.close()
