"""The work of ``vla-client eval`` (`vla_client.cli.eval` parses its command line): start the
built-in server when no URL is given, run every mode at every delay, episode by episode, and
report the matrix as a table, JSON, a plot and recordings. Imported when the command runs, so
that its options are parsed without numpy, the client or the simulator."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import numpy as np

from vla_client.cli.checks import check_output_file, check_output_folder, require_module
from vla_client.cli.common import (
    check_transport_installed,
    client_options,
    server_metadata,
    stage_percentiles,
)
from vla_client.cli.failures import failure_line
from vla_client.cli.output import human_bytes, print_json, print_table
from vla_client.cli.progress import Progress
from vla_client.cli.rerun_option import check_rerun, rerun_log
from vla_client.cli.server_wait import wait_for_server
from vla_client.client import ActionClient, ActionResult
from vla_client.client.addressing import TransportKind, chosen_endpoint, transport_kind
from vla_client.control.names import CLIENT_MODES
from vla_client.control.safety import SafetyGate
from vla_client.control.watchdog import Watchdog
from vla_client.errors import ContractError, ProtocolError, ServerError, VLAClientError
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata
from vla_client.protocol.families.gr00t import POLICY_FAMILY as GR00T_FAMILY
from vla_client.protocol.families.gr00t_rtc import declare_rtc
from vla_client.protocol.rtc import announced, where_to_find
from vla_client.sim.episode import (
    EpisodeResult,
    EvalConfig,
    Mode,
    World,
    run_episode,
)
from vla_client.sim.network import NetworkDelay, delayed, measure_round_trip
from vla_client.sim.seams import Seams
from vla_client.tasks.reach import ReachSettings, ReachTask
from vla_client.transports.base import Transport
from vla_client.transports.http import HTTPTransport

if TYPE_CHECKING:
    from vla_client.viz.rerun_log import RerunLog

RECORD_HINT_BYTES = 100e6
"""Past this much, the line saying what `--record` wrote suggests `--record-every`."""
PLOT_STYLES = {
    "naive": ("o", "-"), "aligned": ("s", "--"), "blended": ("^", ":"), "rtc": ("D", "-."),
}  # fmt: skip
"""Marker and line per mode, so modes with the same rates stay told apart."""


@dataclass
class Cell:
    """The episodes of one mode at one delay."""

    mode: Mode
    delay_ms: float
    episodes: list[EpisodeResult] = field(default_factory=list)
    recordings: list[Path] = field(default_factory=list)
    """The files `--record` wrote, one per episode."""

    @property
    def success_rate(self) -> float:
        return sum(e.success for e in self.episodes) / max(1, len(self.episodes))

    @property
    def seams(self) -> Seams:
        """The episodes' chunk seams pooled (`vla_client.sim.seams`)."""
        return Seams.pooled(e.seams for e in self.episodes)

    def summary(self) -> dict[str, Any]:
        low, high = wilson_interval(sum(e.success for e in self.episodes), len(self.episodes))
        return {
            "mode": self.mode,
            "delay_ms": self.delay_ms,
            "success_rate": self.success_rate,
            "success_interval_95": [low, high],
            "seams": self.seams.summary(),
            "episodes": [e.summary() for e in self.episodes],
        }


def wilson_interval(successes: int, trials: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of a success rate: what "within noise" means here."""
    if trials == 0:
        return (0.0, 1.0)
    z = 1.96
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = (
        z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    )
    return (max(0.0, centre - half), min(1.0, centre + half))


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    world = _make_world(args)
    try:
        with _server(args) as url:
            args.url = url
            cells, round_trip_s, options = _run_matrix(args, world)
    finally:
        close = getattr(world, "close", None)
        if close is not None:
            close()
    results = [r for cell in cells for e in cell.episodes for r in e.results]
    if args.plot:
        plot_success(cells, args.plot, _title(args, options))
    _report(args, cells, round_trip_s, options, results)
    return 1 if any(e.error for cell in cells for e in cell.episodes) else 0


def _check_args(args: argparse.Namespace) -> None:
    if args.round_trip_ms is not None and args.time == "real":
        raise argparse.ArgumentError(None, "--round-trip-ms is for --time simulated")
    if args.env is None and (args.env_option or args.env_camera or args.env_state):
        raise argparse.ArgumentError(None, "--env-option, --env-camera and --env-state need --env")
    if args.env is not None and args.url is None:
        raise argparse.ArgumentError(
            None, "--env needs a server URL: the built-in reach policy only solves the reach task"
        )
    if len(set(args.mode)) != len(args.mode) or len(set(args.delay_ms)) != len(args.delay_ms):
        raise argparse.ArgumentError(None, "--mode and --delay-ms name each value once")
    if args.declare_rtc and "rtc" not in args.mode:
        raise argparse.ArgumentError(None, "--declare-rtc is for --mode rtc: add that mode")
    if args.plot:
        require_module("matplotlib", "--plot")
        check_output_file(args.plot, "--plot")
    if args.record:
        check_output_folder(args.record, "--record")
    elif args.record_every != 1:
        raise argparse.ArgumentError(None, "--record-every needs --record")
    check_rerun(args)
    check_transport_installed(args.url, args.layout, args.endpoint)
    if args.transport == "websocket":
        require_module("websockets", "--transport websocket")
    client_options(args)  # its usage errors now, before any work


def _make_world(args: argparse.Namespace) -> World:
    if args.env is None:
        settings = ReachSettings(rate_hz=args.rate)
        if args.max_steps is not None:
            settings = ReachSettings(rate_hz=args.rate, duration_s=args.max_steps / args.rate)
        return ReachTask(settings)
    from vla_client.server.policies.loading import parse_options
    from vla_client.sim.gym import GymWorld

    try:
        options = parse_options(args.env_option)
    except VLAClientError as exc:
        message = str(exc).replace("--policy-option", "--env-option")
        raise argparse.ArgumentError(None, message) from None
    try:
        return GymWorld(
            args.env,
            options=options,
            cameras=dict(args.env_camera),
            state_keys=args.env_state,
            task=args.task,
            max_steps=args.max_steps,
        )
    except ValueError as exc:
        raise argparse.ArgumentError(None, str(exc)) from None


@contextlib.contextmanager
def _server(args: argparse.Namespace) -> Iterator[str]:
    if args.url is not None:
        wait_for_server(args.url, args.wait_for_server)
        yield args.url
        return
    from vla_client.server import LocalServer, create_app
    from vla_client.server.policies import ReachFlowPolicy, ReachPolicy

    # Real-time chunking needs a flow policy, and a comparison the same policy in every mode.
    policy = ReachFlowPolicy if "rtc" in args.mode else ReachPolicy
    with LocalServer(create_app(policy(rate_hz=args.rate))) as server:
        yield server.url


def _run_matrix(
    args: argparse.Namespace, world: World
) -> tuple[list[Cell], float | None, dict[str, Any]]:
    options = client_options(args)
    delay_jitter = args.jitter_ms / 1e3
    with _client(args, options, NetworkDelay(0.0, 0.0)) as probe:
        metadata = _declared(args, server_metadata(probe))
        _check_modes(args, metadata)
        first = _first_observation(args, world)
        round_trip_s, served = _preflight(args, probe, first)
        horizon = metadata.output.action_horizon if metadata is not None else None
        horizon = horizon or len(served)
        _check_action_dim(args, world, served.shape[1])
        options = {
            **options,
            "encoding": probe.options.encoding,
            "wire": probe.options.wire,
            "transport": _transport_kind(args),
        }
    gate = SafetyGate.from_metadata(metadata) if metadata is not None else SafetyGate()
    prefetch_at = args.prefetch_at if args.prefetch_at is not None else horizon // 2
    if prefetch_at >= horizon:
        raise argparse.ArgumentError(
            None,
            f"--prefetch-at {prefetch_at} is not below the server's action horizon of {horizon}: "
            f"give 0..{horizon - 1} (actions left when the next chunk is asked for)",
        )
    cells = []
    with rerun_log(args) as log:
        for mode, delay in itertools.product(args.mode, args.delay_ms):
            network = NetworkDelay(delay / 1e3, delay_jitter)
            config = EvalConfig(
                mode=mode,
                rate_hz=args.rate,
                prefetch_at=prefetch_at,
                blend_steps=args.blend_steps,
                realtime=args.time == "real",
                delay=network,
                give_up_s=args.give_up_s,
            )
            cells.append(_run_cell(args, world, config, gate, round_trip_s, options, metadata, log))
    return cells, round_trip_s, options


def _declared(args: argparse.Namespace, metadata: ActionMetadata | None) -> ActionMetadata | None:
    """`metadata` announcing real-time chunking with ``--declare-rtc`` (GR00T's server only:
    the others announce it themselves, or cannot do it)."""
    if not args.declare_rtc:
        return metadata
    if metadata is None or metadata.policy_family != GR00T_FAMILY:
        said = (
            f"its metadata says policy_family {metadata.policy_family!r}"
            if metadata is not None
            else "it announces no metadata"
        )
        raise argparse.ArgumentError(
            None,
            f"--declare-rtc: the server at {args.url} is not GR00T's ({said}); other servers "
            "announce real-time chunking themselves: leave --declare-rtc out",
        )
    return declare_rtc(metadata)


def _check_modes(args: argparse.Namespace, metadata: ActionMetadata | None) -> None:
    """Refuse ``--mode rtc`` (one line) against a server that does not announce it."""
    if "rtc" in args.mode and (metadata is None or announced(metadata.capabilities) is None):
        gr00t = metadata is not None and metadata.policy_family == GR00T_FAMILY
        hint = (
            "; GR00T's server announces nothing: --declare-rtc if its policy applies GR00T "
            "N1.7's rtc_* options"
            if gr00t
            else ""
        )
        if metadata is not None and (found := where_to_find(metadata.server)):
            hint = f"; {found}"
        raise argparse.ArgumentError(
            None,
            f"--mode rtc: the server at {args.url} announces no real-time chunking "
            f"(capabilities.rtc); it supports modes {' '.join(CLIENT_MODES)}{hint}",
        )


def _run_cell(
    args: argparse.Namespace,
    world: World,
    config: EvalConfig,
    gate: SafetyGate,
    round_trip_s: float | None,
    options: dict[str, Any],
    metadata: ActionMetadata | None,
    log: RerunLog | None = None,
) -> Cell:
    cell = Cell(config.mode, config.delay.delay_s * 1e3)
    label = f"{config.mode} {cell.delay_ms:g} ms"
    make_watchdog = _watchdog_factory(args)
    with (
        _client(args, client_options(args), config.delay if config.realtime else None) as client,
        Progress(args.episodes, label=label, enabled=None if not args.json else False) as bar,
    ):
        for index in range(args.episodes):
            seed = args.seed + index
            record = None
            if args.record:
                folder = Path(args.record)
                folder.mkdir(parents=True, exist_ok=True)
                record = folder / f"{config.mode}-{cell.delay_ms:g}ms-seed{seed}.vlaobs"
                cell.recordings.append(record)
            cell.episodes.append(
                run_episode(
                    world,
                    client.infer,
                    seed,
                    config,
                    round_trip_s=round_trip_s or 0.0,
                    gate=gate,
                    make_watchdog=make_watchdog,
                    record=record,
                    record_every=args.record_every,
                    reset=client.reset,
                    log=log,
                    server=metadata,
                )
            )
            bar.advance()
    return cell


def _watchdog_factory(
    args: argparse.Namespace,
) -> Callable[[Callable[[], float]], Watchdog] | None:
    if args.watchdog is None:
        return None
    timeout, behaviour = args.watchdog, args.watchdog_behaviour
    return lambda clock: Watchdog(timeout, behaviour, clock=clock)


def _transport_kind(args: argparse.Namespace) -> TransportKind:
    endpoint = chosen_endpoint(args.endpoint, getattr(args, "layout", None))
    return transport_kind(urlsplit(args.url).scheme, args.transport, endpoint)


@contextlib.contextmanager
def _client(
    args: argparse.Namespace, options: dict[str, Any], delay: NetworkDelay | None
) -> Iterator[ActionClient]:
    """A client for `args.url`; with `delay`, its transport sleeps that delay both ways."""
    transport: Transport | Literal["http", "websocket"] | None = args.transport
    if delay is not None and _transport_kind(args) in ("zmq", "ipc"):
        if delay.delay_s or delay.jitter_s:
            raise ValueError(
                f"--time real adds its --delay-ms over HTTP and websockets only, not to "
                f"{args.url}; use --time simulated"
            )
        delay = None  # nothing to add
    if delay is not None:
        inner: Transport
        if _transport_kind(args) == "websocket":
            from vla_client.transports.websocket import WebSocketTransport

            inner = WebSocketTransport(
                args.url,
                endpoint="openpi" if args.layout is not None else None,
                timeout_s=options["timeout_s"],
                api_key=options["api_key"],
            )
        else:
            inner = HTTPTransport(
                args.url, timeout_s=options["timeout_s"], api_key=options["api_key"]
            )
        transport = delayed(inner, delay.sampler(args.seed))
    with ActionClient(args.url, transport=transport, **options) as client:
        yield client


def _robot(args: argparse.Namespace) -> str:
    """The robot, as a line names it: the environment, or the built-in task."""
    return f"the environment {args.env}" if args.env else "the built-in reach task"


def _first_observation(args: argparse.Namespace, world: World) -> Observation:
    """What the robot sees at the start of the first episode, for the preflight; an
    environment that fails here stops the run with one line (`ValueError`)."""
    try:
        world.reset(args.seed)
        images = world.frames()
        return Observation(images, state=world.state(), task=world.task)
    except Exception as exc:  # the environment's own error, whatever its type
        raise ValueError(
            f"{_robot(args)} failed before the first episode: {type(exc).__name__}: {exc}"
        ) from exc


def _preflight(
    args: argparse.Namespace, client: ActionClient, first: Observation
) -> tuple[float | None, np.ndarray]:
    """Real requests before the run, so a server that cannot take the robot's observation
    stops it with one line. Returns, with simulated time, the round trip the run charges, and
    the last chunk the server answered (what it gives: its horizon and action dim)."""
    answered: list[ActionResult] = []

    def infer(observation: Observation) -> ActionResult:
        answered.append(client.infer(observation))
        return answered[-1]

    try:
        if args.time == "real":
            infer(first)
            return None, _one_chunk(args, answered[-1].actions)
        measured = measure_round_trip(infer, first)
    except ContractError as exc:  # said in flags: --camera-map wrist=top, --resize pad
        raise argparse.ArgumentError(None, failure_line(exc, args)) from None
    except ServerError as exc:
        if 400 <= exc.status_code < 500:
            raise argparse.ArgumentError(
                None, f"the server refuses the observation: {exc}"
            ) from None
        raise
    charged = args.round_trip_ms / 1e3 if args.round_trip_ms is not None else measured
    return charged, _one_chunk(args, answered[-1].actions)


def _one_chunk(args: argparse.Namespace, actions: np.ndarray) -> np.ndarray:
    """`actions` when they are one chunk [H, D], as the executor plays; else `ProtocolError`
    (a batch, say): every episode would drop every reply."""
    if actions.ndim != 2:
        raise ProtocolError(
            f"the server at {args.url} answers actions of shape {list(actions.shape)}, not one "
            "chunk [H, D]: eval plays one chunk per request"
        )
    return actions


def _check_action_dim(args: argparse.Namespace, world: World, served: int) -> None:
    """Refuse, before the first episode, a server whose actions the robot cannot take: every
    episode would fail on the first chunk."""
    if served == world.action_dim:
        return
    fix = (
        f"serve a policy whose actions have {world.action_dim} (for the reference policy, "
        f"vla-client serve --action-dim {world.action_dim})"
        if args.env
        else "serve the reach task's policy, vla-client serve --policy reach (the reference "
        "policy knows nothing of the task)"
    )
    raise argparse.ArgumentError(
        None,
        f"{_robot(args)} takes actions of {world.action_dim} values, the server at {args.url} "
        f"gives {served}: {fix}",
    )


def _title(args: argparse.Namespace, options: dict[str, Any]) -> str:
    robot = args.env or "reach task"
    return (
        f"{robot}, {options['encoding']}/{options['wire']} over {options['transport']}, "
        f"{args.rate:g} Hz, {args.episodes} episode{'s' if args.episodes > 1 else ''} per point, "
        f"{args.time} time"
    )


def plot_success(cells: Sequence[Cell], path: str, title: str) -> None:
    """Success rate against one-way delay, a line per mode, with 95 % intervals; beside it the
    seam metric (jump at chunk switches over the step within chunks), per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (axis, seam_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in dict.fromkeys(cell.mode for cell in cells):
        row = sorted((c for c in cells if c.mode == mode), key=lambda c: c.delay_ms)
        delays = [c.delay_ms for c in row]
        rates = [100 * c.success_rate for c in row]
        bounds = [wilson_interval(sum(e.success for e in c.episodes), len(c.episodes)) for c in row]
        marker, line = PLOT_STYLES[mode]
        axis.plot(delays, rates, marker=marker, linestyle=line, label=mode)
        axis.fill_between(
            delays, [100 * b[0] for b in bounds], [100 * b[1] for b in bounds], alpha=0.15
        )
        seam_axis.plot(delays, [c.seams.ratio for c in row], marker=marker, linestyle=line)
    axis.set_xlabel("one-way network delay (ms)")
    axis.set_ylabel("success rate (%)")
    axis.set_ylim(-2, 102)
    axis.legend(title="chunk execution")
    seam_axis.set_xlabel("one-way network delay (ms)")
    seam_axis.set_ylabel("seam jump / within-chunk step")
    seam_axis.set_ylim(bottom=0)
    for each in (axis, seam_axis):
        each.grid(alpha=0.3)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _report(
    args: argparse.Namespace,
    cells: Sequence[Cell],
    round_trip_s: float | None,
    options: dict[str, Any],
    results: Sequence[ActionResult],
) -> None:
    stages = stage_percentiles(results)
    recorded = [path for cell in cells for path in cell.recordings if path.exists()]
    recorded_bytes = sum(path.stat().st_size for path in recorded)
    if args.json:
        print_json({
            "url": args.url,
            "robot": args.env or "reach",
            "encoding": options["encoding"],
            "wire": options["wire"],
            "transport": options["transport"],
            "time": args.time,
            "rate_hz": args.rate,
            "jitter_ms": args.jitter_ms,
            "round_trip_ms": None if round_trip_s is None else round_trip_s * 1e3,
            "cells": [cell.summary() for cell in cells],
            "timings_ms": {name: {"p50": a, "p90": b, "p99": c} for name, a, b, c in stages},
            "recorded": None if not args.record else {
                "folder": args.record, "files": len(recorded), "bytes": recorded_bytes,
                "every_ticks": args.record_every,
            },
            "plot": args.plot,
        })  # fmt: skip
        return
    rows = [_row(cell) for cell in cells]
    charged = "" if round_trip_s is None else f", round trip charged {round_trip_s * 1e3:.1f} ms"
    print(f"{_title(args, options)}{charged}")
    print_table(
        ("mode", "delay ms", "success (95%)", "return", "steps", "stale ticks",
         "obs->action ms", "seam jump/step", "failed"),
        rows,
    )  # fmt: skip
    if stages:
        print()
        print_table(("stage (ms)", "p50", "p90", "p99"), stages)
    _print_failures(cells)
    if args.record:
        every = "every tick" if args.record_every == 1 else f"every {args.record_every} ticks"
        hint = ""
        if args.record_every == 1 and recorded_bytes > RECORD_HINT_BYTES:
            hint = "; --record-every N writes every Nth tick only"
        print(
            f"recorded {len(recorded)} episode(s) in {args.record}, {every}: "
            f"{human_bytes(recorded_bytes)} (see 'vla-client view FILE'){hint}"
        )
    if args.plot:
        print(f"saved plot to {args.plot}")


def _row(cell: Cell) -> tuple[object, ...]:
    """A cell's row of the table: its mode and delay, success with its 95% interval, and the
    means over its episodes."""
    episodes = cell.episodes
    low, high = wilson_interval(sum(e.success for e in episodes), len(episodes))
    return (
        cell.mode,
        f"{cell.delay_ms:g}",
        f"{100 * cell.success_rate:.0f}% ({100 * low:.0f}-{100 * high:.0f})",
        _mean(e.episode_return for e in episodes),
        _mean(e.steps for e in episodes),
        _mean(e.staleness_ticks for e in episodes),
        _mean(e.observation_to_action_ms for e in episodes),
        cell.seams.ratio,
        sum(e.error is not None for e in episodes),
    )


def _print_failures(cells: Sequence[Cell]) -> None:
    """Why each episode that failed did, one line each."""
    for cell in cells:
        for episode in cell.episodes:
            if episode.error:
                print(f"{cell.mode} {cell.delay_ms:g} ms seed {episode.seed}: {episode.error}")


def _mean(values: Iterable[float]) -> float:
    numbers = [float(v) for v in values if not math.isnan(float(v))]
    return sum(numbers) / len(numbers) if numbers else math.nan
