"""The boundary between serving and inference: a `Policy` sees arrays, never wire formats.

By the time a policy runs, the entrypoint has decoded every image to an HxWx3 uint8 RGB array
(and, for a policy that declares depth cameras, each depth frame to an HxW array of the dtype
it declares) and validated the state and parameters. A policy declares what it expects
(`PolicySpec`, which becomes the metadata document) and maps a batch of `PolicyInput`s to
action chunks, which the server checks (`check_actions`) before any client sees them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vla_client._version import __version__
from vla_client.errors import PolicyOutputError, PolicyStartError
from vla_client.protocol.metadata_fields import DEPTH_DTYPES
from vla_client.protocol.rtc import RTCRequest

WARM_UP_IMAGE_SIZE = (224, 224)
"""(height, width) of the warm-up frames for a policy that announces no `image_size`."""
WARM_UP_CAMERA = "camera"
"""The warm-up frame's camera name for a policy that takes any names."""


@dataclass(frozen=True)
class PolicyInput:
    """One observation as a policy receives it: arrays and plain values only.

    `images` holds every camera by name: colour frames HxWx3 uint8 RGB, and the depth cameras
    the policy declares (`PolicySpec.depth_cameras`) as HxW arrays of the dtype declared for
    them, exactly as the robot sent them."""

    images: dict[str, np.ndarray]
    state: np.ndarray | None = None
    task: str = ""
    action_horizon: int | None = None
    num_inference_steps: int | None = None
    seed: int | None = None
    rtc: RTCRequest | None = None
    """Real-time chunking's prefix, delay and horizon, for a policy that announces RTC
    (`vla_client.server.policies.flow`); None for a plain request."""


@dataclass(frozen=True)
class PolicySpec:
    """What a policy takes and gives.

    `camera_names` empty means any camera names are accepted; `camera_aliases` maps other names
    a client may use (LeRobot's, say) to them. `image_size` is (height, width): with
    `image_size_required` frames of another size are refused, without it the size is only
    announced, for clients that resize before sending. With `state_required` a request without
    a state is refused (400) before it reaches the policy. `about` says what is served (a LeRobot
    policy's type and folder, say): the metadata's ``policy`` block, left out when empty.

    A request may ask for a shorter chunk or other denoising steps (``parameters``), never more
    than the policy announces: `max_action_horizon` (None: `action_horizon`) and
    `max_inference_steps` (None: `num_inference_steps`; a policy announcing neither takes no
    steps). Past those the request is refused (400) before the policy runs: both size the
    policy's work and the reply, which an 850-byte request could otherwise make gigabytes.

    `depth_cameras` names the depth cameras the policy reads, each with the dtype its frames
    must have: ``"uint16"`` (millimetres) or ``"float32"`` (metres). Every one must come in
    each request (``input.observation.depth``); a depth frame for another camera, or of the
    other dtype, is refused (400), and so is any depth frame when there are none. They are
    announced as ``input.depth_cameras``, apart from `camera_names`, which are colour only.
    """

    family: str
    action_horizon: int
    action_dim: int
    camera_names: tuple[str, ...] = ()
    image_size: tuple[int, int] | None = None
    state_dim: int | None = None
    num_inference_steps: int | None = None
    extra_capabilities: dict[str, Any] = field(default_factory=dict)
    camera_aliases: dict[str, str] = field(default_factory=dict)
    image_size_required: bool = False
    state_required: bool = False
    about: dict[str, Any] = field(default_factory=dict)
    max_action_horizon: int | None = None
    max_inference_steps: int | None = None
    depth_cameras: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        wrong = {k: v for k, v in self.depth_cameras.items() if v not in DEPTH_DTYPES}
        if wrong:
            raise ValueError(
                f"depth_cameras gives {wrong}; a depth camera's dtype is "
                f"{' or '.join(DEPTH_DTYPES)}"
            )
        both = sorted(set(self.depth_cameras) & set(self.camera_names))
        if both:
            raise ValueError(f"cameras {both} are both colour (camera_names) and depth")


class Policy(ABC):
    """A policy served by the reference server.

    Its life, as the server drives it:

    1. Made where the server starts, holding settings only: it travels to the process that
       runs it (the inference worker) pickled, so it must not hold open files, sockets,
       threads or device memory yet (see `vla_client.server.worker.handoff`).
    2. `load` runs once in that process: weights, device memory, compiled kernels.
    3. `warm_up` runs once after it, with one observation of the announced shapes
       (`warm_up_input`), before the server reports ready: ``GET /health`` says
       ``{"status": "loading"}`` (503) until then, and requests get 503 with ``Retry-After``.
    4. `infer_batch` (or `infer`) serves requests; `check_actions` checks each chunk.
    5. `close` runs on shutdown.

    A `load` or `warm_up` that raises stops ``vla-client serve`` with one line and exit code 1.
    An observation the policy cannot read (its frames do not show what it looks for) is refused
    by raising `PolicyInputError` from `infer`: its request gets 400 with the message as the
    detail, so say there what the policy needs. Any other exception is a 500 whose detail
    names the exception's type only (the message may hold what a client must not see).
    """

    @property
    @abstractmethod
    def spec(self) -> PolicySpec:
        """What this policy expects and returns."""

    @abstractmethod
    def infer(self, observation: PolicyInput) -> np.ndarray:
        """One float32 action chunk ``[H, D]`` for one observation."""

    def infer_batch(self, observations: Sequence[PolicyInput]) -> list[np.ndarray]:
        """Chunks for several observations; policies that batch on a device override this."""
        return [self.infer(observation) for observation in observations]

    def load(self) -> None:  # noqa: B027 - optional hook, most policies hold nothing to load
        """Build what the policy needs to run (weights, device memory); runs in the worker."""

    def warm_up(self, example: PolicyInput) -> None:  # noqa: B027 - optional hook
        """Run once before serving, e.g. ``self.infer_batch([example])`` to compile kernels and
        fill caches so the first robot does not pay for it. Does nothing unless overridden."""

    def decodes_jpeg(self) -> bool:
        """Whether, once loaded, the policy decodes JPEG frames itself (on its device): then
        the entrypoint hands it a JPEG frame as the file's bytes, a 1-D uint8 array, in
        `PolicyInput.images`. False unless overridden."""
        return False

    def batch_timings(self) -> Mapping[str, float]:
        """Stage timings in ms the policy measured in its last `infer_batch` call (a device
        decode, say); the server adds them to each reply's timings. Empty unless overridden."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, most policies hold nothing
        """Release resources (device memory, files)."""


def warm_up_input(spec: PolicySpec) -> PolicyInput:
    """The warm-up observation for `spec`: a black frame for each announced camera (one named
    `WARM_UP_CAMERA` if any names go) and a zero frame of its dtype for each depth camera, at
    the announced `image_size` (else `WARM_UP_IMAGE_SIZE`), a zero state of `state_dim` values
    when one is announced."""
    height, width = spec.image_size or WARM_UP_IMAGE_SIZE
    names = spec.camera_names or (WARM_UP_CAMERA,)
    state = np.zeros(spec.state_dim, np.float32) if spec.state_dim is not None else None
    images = {name: np.zeros((height, width, 3), np.uint8) for name in names}
    images.update(
        {name: np.zeros((height, width), dtype) for name, dtype in spec.depth_cameras.items()}
    )
    return PolicyInput(images=images, state=state)


def start_policy(policy: Policy) -> None:
    """`Policy.load`, then `Policy.warm_up`; `PolicyStartError` naming the step that raised."""
    _step("load", policy.load)
    _step("warm up", lambda: policy.warm_up(warm_up_input(policy.spec)))


def _step(name: str, run: Callable[[], None]) -> None:
    try:
        run()
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
        raise PolicyStartError(f"policy failed to {name}: {reason}") from exc


def check_actions(chunk: Any, spec: PolicySpec, horizon: int | None) -> np.ndarray:
    """`chunk` as a C-contiguous float32 ``[H, D]`` array (or ``[N, H, D]`` candidates), with
    `D` the announced `action_dim` and ``1 <= H <= horizon`` (the request's, else the
    announced one); `PolicyOutputError` saying what is wrong otherwise."""
    try:
        array = np.asarray(chunk)
    except Exception as exc:  # ragged lists, objects that refuse conversion
        raise PolicyOutputError(f"policy returned actions that are not an array ({exc})") from exc
    if array.dtype.kind not in "fiu":
        raise PolicyOutputError(
            f"policy returned actions of dtype {array.dtype}; expected numbers (float32)"
        )
    limit = horizon or spec.action_horizon
    if (
        array.ndim not in (2, 3)
        or array.shape[-1] != spec.action_dim
        or not 1 <= array.shape[-2] <= limit
    ):
        raise PolicyOutputError(
            f"policy returned actions of shape {list(array.shape)}; expected [H, "
            f"{spec.action_dim}] with H in 1..{limit}"
        )
    result = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(result).all():
        raise PolicyOutputError("policy returned NaN or infinite actions")
    return result


def metadata_document(
    spec: PolicySpec, *, model: str, websockets: bool = True, openpi_layout: str = "flat"
) -> dict[str, Any]:
    """The GET /v1/actions/metadata body for `spec` (SGLang's generic layout); `websockets`
    says whether the server also serves the realtime and openpi websockets, `openpi_layout`
    which request layout its openpi endpoint reads; `server` names this server and its version
    (beyond SGLang's layout, which clients ignore), and `policy` what `spec.about` says, when
    it says anything.

    Built as `ActionMetadata`, the type clients read it into, and dumped to plain values: a
    spec whose sizes a client would refuse (`vla_client.protocol.metadata_fields`) fails here,
    with the client's `ProtocolError`, rather than at every client.
    """
    # Deferred: the inference worker imports this module for `Policy`, and never needs pydantic.
    from vla_client.protocol.models import ActionMetadata, MetadataInput, MetadataOutput

    metadata = ActionMetadata(
        model=model,
        model_path=model,
        policy_family=spec.family,
        input=MetadataInput(
            image_keys=list(spec.camera_names),
            image_size=list(spec.image_size) if spec.image_size else None,
            image_size_required=spec.image_size_required,
            camera_aliases=dict(spec.camera_aliases),
            state_dim=spec.state_dim,
            openpi_layout=openpi_layout,
            depth_cameras=dict(spec.depth_cameras),
        ),
        output=MetadataOutput.model_validate(
            {
                "action_horizon": spec.action_horizon,
                "action_dim": spec.action_dim,
                "padded_action_dim": spec.action_dim,
                **_announced("max_action_horizon", spec.max_action_horizon),
            }
        ),
        defaults={
            "num_inference_steps": spec.num_inference_steps,
            **_announced("max_inference_steps", spec.max_inference_steps),
        },
        capabilities={
            "realtime_websocket": websockets,
            "openpi_websocket": websockets,
            "batch_inputs": False,
            "multiple_candidates": False,
            "return_digest": True,
            **spec.extra_capabilities,
        },
        server={"name": "vla-client", "version": __version__},
        policy=dict(spec.about) if spec.about else None,
    )
    return metadata.model_dump(mode="json")


def _announced(key: str, value: int | None) -> dict[str, int]:
    """``{key: value}`` for a bound the policy announces, nothing for one it leaves out."""
    return {} if value is None else {key: value}
