"""``vla-client serve``: run the reference action server.

Every option is checked before anything starts: a value that cannot work is one line on
stderr naming the option and the reason, and exit code 2. The port is bound and listening
first, here, so a port in use is that one line too (the bound socket is then the one served
on), and a client started beside the server (``vla-client serve &`` and then ``vla-client
send``) waits in the socket's queue from then on rather than being refused. The server
answers while the policy loads and warms up in the worker (``/health`` answers ``loading``
meanwhile; uvicorn's start-up lines wait until it is ready): a policy that cannot start stops
the server, one line, exit code 1, or 2 naming ``--weights`` when a weights file was given.

``--port 0`` is refused: it would listen on a port chosen at random, which no robot could find
(`LocalServer` picks a free port for tests and demos).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import ipaddress
import math
import os
import socket
import sys
from typing import TYPE_CHECKING

from vla_client.cli.output import fail
from vla_client.cli.parser import USAGE_EXIT
from vla_client.cli.serve_policy import add_policy_options, build_policy, in_range, list_policies
from vla_client.cli.serve_protocol import add_protocol_options, protocol_settings
from vla_client.protocol.endpoints import API_KEY_ENV
from vla_client.protocol.names import LAYOUT_NAMES

if TYPE_CHECKING:
    from vla_client.server import ServerConfig
    from vla_client.server.config import RecordSettings
    from vla_client.server.policy import Policy

MAX_API_SERVERS = 64
DEFAULT_RECORD_MB = 1024.0
DEFAULT_RECORD_FILES = 16
LAYOUTS = LAYOUT_NAMES


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    parser.description = (
        "Run the reference action server. Every option is checked before it "
        "starts; a bad one is one line naming it, exit code 2."
    )
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="interface to bind (default: %(default)s, loopback)")
    add("--port", type=int, default=8000, help="TCP port, 1..65535 (default: %(default)s)")
    add(
        "--port-file",
        metavar="PATH",
        help="write the port listened on to PATH once it is bound, for a container's health "
        "check; removed when the server stops (default: none)",
    )
    add_policy_options(parser)
    add(
        "--max-batch",
        type=int,
        default=8,
        help="requests per policy call, 1..256 (default: %(default)s)",
    )
    add(
        "--batch-wait-ms",
        type=float,
        default=0.0,
        help="how long a batch may wait to fill, 0..1000 ms (default: %(default)s)",
    )
    add(
        "--queue-size",
        type=int,
        default=32,
        help="requests queued or running before 503s, 1..4096 (default: %(default)s)",
    )
    add(
        "--torch-threads",
        type=int,
        help="OpenMP/torch threads of the inference worker, 1 to the usable cores (default: "
        "$OMP_NUM_THREADS, else the usable cores less one per --api-servers process); its idle "
        "threads sleep (OMP_WAIT_POLICY=PASSIVE) unless OMP_WAIT_POLICY is set",
    )
    add(
        "--in-process",
        action="store_true",
        help="run the policy in a thread, no worker process (default: a worker process)",
    )
    add(
        "--api-servers",
        type=int,
        default=1,
        help="entrypoint processes sharing the port and one inference worker, "
        f"1..{MAX_API_SERVERS} (default: %(default)s)",
    )
    add(
        "--max-body-mb",
        type=float,
        default=64.0,
        help="largest request body, MiB (default: %(default)s)",
    )
    add(
        "--api-key",
        help="require 'Authorization: Bearer <key>' on every route but /health "
        f"(default: ${API_KEY_ENV}, else no key; prefer the variable, arguments show in ps)",
    )
    add(
        "--ipc",
        metavar="PATH",
        help="also listen on a Unix socket at PATH (mode 0600) for clients on this host: "
        "ActionClient('ipc://PATH') writes frames once into shared memory the policy reads "
        "(docs/server.md, 'Same host: ipc://') (default: none, the port only)",
    )
    add(
        "--openpi-layout",
        default="flat",
        help=f"request layout of the openpi websocket: {', '.join(LAYOUTS)} (default: %(default)s)",
    )
    add_protocol_options(parser)
    add(
        "--send-policy-errors",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="tell clients a policy exception's message in its 500 (the traceback is in this "
        "server's log either way) (default: on for a loopback --host, where the client is the "
        "policy's author, off otherwise: messages can carry paths or secrets)",
    )
    add("--record", metavar="DIR", help="record every served request into DIR (default: off)")
    add(
        "--record-max-mb",
        type=float,
        default=DEFAULT_RECORD_MB,
        help="most MiB the recordings hold together; past it the oldest file goes "
        "(default: %(default)s)",
    )
    add(
        "--record-max-files",
        type=int,
        default=DEFAULT_RECORD_FILES,
        help="most recording files kept (default: %(default)s)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list_policies:
        return list_policies()
    # First, so that without the 'server' extra this is the one error (named by cli.main).
    import uvicorn  # noqa: F401

    try:
        in_range("--port", args.port, 1, 65535)
        sock = _bind(args.host, args.port)  # first: a client started beside this one queues
        bound_port = sock.getsockname()[1]
    except ValueError as exc:
        return fail(str(exc), USAGE_EXIT)
    try:
        config, policy = _config_and_policy(args)
    except ValueError as exc:
        sock.close()
        return fail(str(exc), USAGE_EXIT)
    try:
        _write_port_file(args.port_file, bound_port)
    except OSError as exc:
        sock.close()
        return fail(
            f"--port-file {args.port_file}: cannot write it ({exc.strerror or exc})", USAGE_EXIT
        )
    _warn_if_open(config)
    from vla_client.server.worker import WorkerStartError

    try:
        if args.api_servers > 1:
            from vla_client.server.api_servers import serve

            serve(policy, config, args.api_servers, sock=sock, log_level="info")
            failure = None
        else:
            failure = _serve_one(policy, config, sock, args.port_file)
    except WorkerStartError as exc:
        failure = exc
    except KeyboardInterrupt:  # during start-up, before the server's own handler is in place
        return 130
    finally:
        _remove_port_file(args.port_file, bound_port)
        sock.close()
    return 0 if failure is None else _failed(args, failure)


def _config_and_policy(args: argparse.Namespace) -> tuple[ServerConfig, Policy]:
    """The server's settings and its policy, each checked (`ValueError` naming the option):
    the Unix socket's path, then the policy, then the family the policy is served in too."""
    config = _config(args)
    if config.ipc_path is not None:
        from vla_client.server.config import check_ipc_path

        check_ipc_path(config.ipc_path)
    policy = build_policy(args)
    _check_protocol(config, policy, args.api_servers)
    return config, policy


def _warn_if_open(config: ServerConfig) -> None:
    """A warning on stderr for a server that anyone on the network may drive."""
    if config.api_key is None and not is_loopback(config.host):
        print(
            f"WARNING: serving on {config.host} without an API key: anyone who can reach this "
            f"port can drive the robot. Set {API_KEY_ENV} or pass --api-key "
            "(see docs/security.md).",
            file=sys.stderr,
        )


def _failed(args: argparse.Namespace, failure: BaseException) -> int:
    """The error line and exit status of a server whose policy did not load: a usage error
    where ``--weights`` named the policy's weights."""
    from vla_client.server.worker import WorkerStartError

    reason = str(failure).splitlines()[0]
    if not isinstance(failure, WorkerStartError):  # ThreadRunner: the policy's own exception
        reason = f"policy failed to load: {type(failure).__name__}: {reason}"
    if args.weights:
        return fail(f"--weights {args.weights}: {reason}", USAGE_EXIT)
    return fail(reason)


def _config(args: argparse.Namespace) -> ServerConfig:
    """The server's settings from the options, each checked with its option's name."""
    from vla_client.server import ServerConfig
    from vla_client.server.config import WorkerSettings

    in_range("--port", args.port, 1, 65535)
    _check_workers(args)
    if not (math.isfinite(args.max_body_mb) and args.max_body_mb > 0):
        raise ValueError(f"--max-body-mb must be a number > 0, got {args.max_body_mb:g}")
    if args.openpi_layout not in LAYOUTS:
        raise ValueError(
            f"--openpi-layout must be one of {', '.join(LAYOUTS)}, got {args.openpi_layout!r}"
        )
    record = _record(args)
    key = _checked_api_key(args)
    return ServerConfig(
        host=args.host,
        port=args.port,
        max_body_bytes=math.ceil(args.max_body_mb * 1024 * 1024),
        api_key=key,
        worker=WorkerSettings(
            max_batch=args.max_batch,
            batch_wait_ms=args.batch_wait_ms,
            queue_size=args.queue_size,
            torch_threads=args.torch_threads,
        ),
        in_process=args.in_process,
        openpi_layout=args.openpi_layout,
        record=record,
        protocol=protocol_settings(args),
        send_policy_errors=(
            is_loopback(args.host) if args.send_policy_errors is None else args.send_policy_errors
        ),
        ipc_path=args.ipc,
    )


def _check_workers(args: argparse.Namespace) -> None:
    """The options of the processes that answer: the API servers, the worker's batches and
    queue, its threads (`ValueError` naming the option)."""
    from vla_client.server.worker.threads import check_torch_threads, check_wait_policy

    in_range("--api-servers", args.api_servers, 1, MAX_API_SERVERS)
    if args.api_servers > 1 and args.in_process:
        raise ValueError("--api-servers needs the worker process; drop --in-process")
    if args.api_servers > 1 and args.ipc is not None:
        raise ValueError("--ipc is served by one entrypoint; drop --api-servers or --ipc")
    in_range("--max-batch", args.max_batch, 1, 256)
    in_range("--queue-size", args.queue_size, 1, 4096)
    in_range("--batch-wait-ms", args.batch_wait_ms, 0, 1000)
    if args.torch_threads is not None and args.in_process:
        raise ValueError("--torch-threads sets the worker process's threads; drop --in-process")
    check_torch_threads("--torch-threads", args.torch_threads)
    if not args.in_process:
        check_wait_policy(os.environ)


def _checked_api_key(args: argparse.Namespace) -> str | None:
    """The API key of ``--api-key`` or the environment, checked; `ValueError` naming where
    it came from."""
    from vla_client.server.config import check_api_key_setting

    key, source = _api_key(args)
    try:
        check_api_key_setting(key)
    except ValueError as exc:
        reason = str(exc).removeprefix("api_key ")
        raise ValueError(f"{source} {reason}") from None
    return key


def _check_protocol(config: ServerConfig, policy: Policy, api_servers: int) -> None:
    """``--protocol``'s checks against the policy and the machine (`check_protocol`)."""
    if config.protocol is not None:
        from vla_client.server.protocols import check_protocol

        check_protocol(config.protocol, policy, config.host, api_servers)


def _record(args: argparse.Namespace) -> RecordSettings | None:
    """``--record`` and its bounds; a folder that cannot be written is no error here: the
    server serves, and says once that recording stopped."""
    from vla_client.server.config import RecordSettings

    if args.record is None:
        for option, given, default in (
            ("--record-max-mb", args.record_max_mb, DEFAULT_RECORD_MB),
            ("--record-max-files", args.record_max_files, DEFAULT_RECORD_FILES),
        ):
            if given != default:
                raise ValueError(f"{option} needs --record DIR")
        return None
    if not args.record:
        raise ValueError("--record needs a folder")
    in_range("--record-max-files", args.record_max_files, 1, 100_000)
    max_bytes = args.record_max_mb * 1024 * 1024
    least = args.record_max_files * 4096
    if not (math.isfinite(max_bytes) and max_bytes >= least):
        raise ValueError(
            f"--record-max-mb must allow 4 KiB per file ({least / 1024 / 1024:g} MiB for "
            f"{args.record_max_files} files), got {args.record_max_mb:g}"
        )
    return RecordSettings(args.record, int(max_bytes), args.record_max_files)


def _api_key(args: argparse.Namespace) -> tuple[str | None, str]:
    """The key and where it came from; an empty one is refused there, not read as "none"."""
    if args.api_key == "":
        raise ValueError("--api-key must not be empty; leave it out to serve without a key")
    if args.api_key is not None:
        return args.api_key, "--api-key"
    key = os.environ.get(API_KEY_ENV)
    if key == "":
        raise ValueError(f"{API_KEY_ENV} is set but empty; unset it to serve without a key")
    return key, API_KEY_ENV


def _write_port_file(path: str | None, port: int) -> None:
    """``--port-file``: the `port` the server listens on, one line, written whole (renamed into
    place, so a reader never sees half of it)."""
    if path is None:
        return
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w") as file:
        file.write(f"{port}\n")
    os.replace(partial, path)


def _remove_port_file(path: str | None, port: int) -> None:
    """The port file goes when the server does (a script waiting for it must not read a dead
    server's port), unless another server has written its own port there since."""
    if path is None:
        return
    with contextlib.suppress(OSError):
        with open(path) as file:
            written = file.read()
        if written == f"{port}\n":
            os.unlink(path)


def _bind(host: str, port: int) -> socket.socket:
    """The server's socket, bound and listening now: a busy port is one line here, not
    uvicorn's six, and a client that connects while the server starts (``vla-client serve &``
    and then ``vla-client send``) waits in the socket's queue instead of being refused."""
    from vla_client.server.local import bind_listener

    try:
        sock = bind_listener(host, port)
    except socket.gaierror as exc:
        raise ValueError(f"--host {host}: no such interface or name ({exc.strerror})") from None
    except OSError as exc:
        raise ValueError(_bind_failure(host, port, exc)) from None
    try:
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        raise ValueError(_bind_failure(host, port, exc)) from None
    return sock


def _bind_failure(host: str, port: int, exc: OSError) -> str:
    """Why `host`:`port` cannot be listened on, naming the option to change."""
    if exc.errno == errno.EADDRINUSE:
        return f"--port {port}: {host}:{port} is already in use"
    if exc.errno == errno.EACCES:
        return f"--port {port}: permission denied (ports below 1024 need privileges)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"--host {host}: not an address of this machine"
    return f"--host {host} --port {port}: cannot listen: {exc.strerror or exc}"


def _serve_one(
    policy: Policy, config: ServerConfig, sock: socket.socket, port_file: str | None
) -> Exception | None:
    """One entrypoint on `sock` until stopped. It listens at once (``/health`` says
    ``loading``) while the policy loads in the background; uvicorn's start-up lines are held
    back until the policy is ready, so a policy that fails to start stops the server with the
    one line the caller prints. Returns the exception the policy failed to start with. The
    `port_file` is removed as the server stops (uvicorn ends a stop by SIGTERM or SIGINT by
    raising the signal again, so the caller's clean-up would not run)."""
    import asyncio
    import contextlib
    import logging
    import signal
    from collections.abc import Iterator
    from types import FrameType

    import uvicorn

    from vla_client.server import create_app
    from vla_client.server.api_servers import remove_stale_folders
    from vla_client.server.config import uvicorn_options
    from vla_client.server.local import listener_url
    from vla_client.server.worker import WorkerRunner

    app = create_app(policy, config)
    startup = app.state.pipeline.startup
    port = sock.getsockname()[1]  # read now: uvicorn closes the socket as it stops
    failure: Exception | None = None
    uvicorn_log = logging.getLogger("uvicorn.error")

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            """uvicorn's (SIGINT, SIGTERM), and SIGHUP, which would otherwise end the server
            at once: a hang-up drains and stops it like SIGTERM, exit code 0."""
            previous = signal.signal(signal.SIGHUP, self._hang_up)
            try:
                with super().capture_signals():
                    try:
                        yield
                    finally:
                        _remove_port_file(port_file, port)
            finally:
                signal.signal(signal.SIGHUP, previous)

        def _hang_up(self, sig: int, frame: FrameType | None) -> None:
            uvicorn_log.warning("Received SIGHUP, exiting.")
            self.should_exit = True

        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            watch = asyncio.ensure_future(self._watch_startup())
            try:
                await super().serve(sockets)
            finally:
                watch.cancel()

        async def _watch_startup(self) -> None:
            nonlocal failure
            failure = await startup.wait()
            if failure is not None:
                self.should_exit = True
                return
            uvicorn_log.setLevel(logging.INFO)
            runner = startup.runner
            if isinstance(runner, WorkerRunner) and runner.threads is not None:
                uvicorn_log.info("Inference worker: %s", runner.threads.describe())
            uvicorn_log.info("Uvicorn running on %s (Press CTRL+C to quit)", listener_url(sock))
            if config.protocol is not None:
                from vla_client.server.protocols import protocol_line

                where = app.state.protocol_url
                uvicorn_log.info(protocol_line(config.protocol, where, listener_url(sock)))

    remove_stale_folders()  # of an earlier `serve --api-servers N` killed outright
    server = Server(uvicorn.Config(app, log_level="info", **uvicorn_options(config)))
    uvicorn_log.setLevel(logging.WARNING)  # after uvicorn.Config, which sets it to info
    logging.getLogger("vla_client.server.startup").setLevel(logging.CRITICAL)  # said by us
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn raises the SIGINT it stopped for again, once stopped
        if not server.started:
            raise
    return failure


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses, the only hosts safe without a key."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
