"""Serve a LeRobot pretrained policy folder (extra ``lerobot``): ``vla-client serve --policy
lerobot --policy-option path=DIR``.

The folder is what LeRobot's ``save_pretrained`` writes: ``config.json``, ``model.safetensors``
and the saved processors (``policy_preprocessor.json``, ``policy_postprocessor.json`` and their
state files). What the server announces is read from ``config.json`` with plain `json`, so the
process that serves HTTP imports neither torch nor lerobot:

- cameras: the VISUAL ``input_features`` without their ``observation.images.`` prefix, the full
  LeRobot keys announced as aliases of them;
- image size: those features' (height, width), when every camera has the same;
- state and action lengths: ``observation.state`` and ``action``;
- horizon: what the policy's ``predict_action_chunk`` returns (ACT: ``chunk_size``; Diffusion:
  ``n_action_steps``).

The processors must hold normalisation statistics for every feature ``config.json`` announces
and normalises (its ``normalization_mapping``): the preprocessor's normaliser for the cameras
and the state, the postprocessor's for the actions. LeRobot's normaliser passes a feature it
has no statistics for through untouched, so a folder whose ``config.json`` renamed a camera
(``top`` to ``front``) while the statistics kept the old name would serve, feeding that camera
un-normalised; it is refused at start instead (`check_statistics`). The statistics' names are
read from the processors' JSON and the headers of their safetensors files, without torch.

`load` (in the worker) builds the policy class and ``make_pre_post_processors`` from the folder.
Each observation then goes the way LeRobot's async-inference ``PolicyServer`` takes it: LeRobot's
``raw_observation_to_observation`` (frames resized bilinearly to the policy's size, scaled to
float in [0, 1], the state stacked), the preprocessor, ``predict_action_chunk``, and the
postprocessor on each step of the chunk.

Diffusion's ``predict_action_chunk`` reads observation queues that ``select_action`` fills.
Requests carry no episode, so each one is served as the first step of an episode: the queues are
reset, ``select_action`` fills all ``n_obs_steps`` of them with this observation (as LeRobot does
at an episode's start) and the chunk is its ``n_action_steps`` actions. A request's ``seed``
seeds torch just before the model runs, so a diffusion chunk can be reproduced.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vla_client.errors import PolicyLoadError
from vla_client.server.policy import Policy, PolicyInput, PolicySpec
from vla_client.validation import check_choice

IMAGE_PREFIX = "observation.images."
STATE_KEY = "observation.state"
ACTION_KEY = "action"
NORMALISERS = {
    "policy_preprocessor.json": "normalizer_processor",
    "policy_postprocessor.json": "unnormalizer_processor",
}
"""Each processor file, and the registry name of its step that holds the statistics."""
HORIZON_FIELDS = {"act": "chunk_size", "diffusion": "n_action_steps"}
"""The policy types served, and the config field that says how long their chunks are."""
FOLDER_FILES = (
    "config.json",
    "model.safetensors",
    "policy_preprocessor.json",
    "policy_postprocessor.json",
)
DEVICES = ("auto", "cpu", "cuda", "mps")


@dataclass(frozen=True)
class LeRobotFolder:
    """What ``config.json`` of a LeRobot pretrained folder says, read without torch."""

    path: Path
    policy_type: str
    cameras: tuple[str, ...]
    image_sizes: tuple[tuple[int, int], ...]
    state_dim: int | None
    action_dim: int
    horizon: int
    num_inference_steps: int | None


def read_folder(path: str | Path) -> LeRobotFolder:
    """The spec of the LeRobot folder at `path`; `PolicyLoadError` with one line saying what is
    missing or wrong."""
    if not isinstance(path, (str, Path)) or not str(path):
        raise PolicyLoadError(f"the LeRobot policy's path must be a folder's path, got {path!r}")
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise PolicyLoadError(f"LeRobot policy folder {folder} is not a directory")
    missing = [name for name in FOLDER_FILES if not (folder / name).is_file()]
    if missing:
        raise PolicyLoadError(
            f"LeRobot policy folder {folder} lacks {', '.join(missing)} (save_pretrained writes "
            "the policy; the processors' save_pretrained writes their files)"
        )
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PolicyLoadError(f"{folder / 'config.json'} is not readable JSON: {exc}") from None
    if not isinstance(config, dict):
        raise PolicyLoadError(f"{folder / 'config.json'} must hold a JSON object")
    spec = _spec_of(folder, config)
    check_statistics(folder, config)
    return spec


def check_statistics(folder: Path, config: dict[str, Any]) -> None:
    """`PolicyLoadError` naming the first feature ``config.json`` announces and normalises
    that its processor holds no statistics for (see the module's docstring)."""
    modes = config.get("normalization_mapping") or {}
    where = folder / "config.json"
    for table, file in (("input_features", "policy_preprocessor.json"),
                        ("output_features", "policy_postprocessor.json")):  # fmt: skip
        wanted = {
            key: modes.get(kind, "IDENTITY")
            for key, (kind, _) in _features(config, table, where).items()
            if modes.get(kind, "IDENTITY") != "IDENTITY"
        }
        if not wanted:
            continue
        covered = _statistics(folder, file)
        for key, mode in wanted.items():
            if key not in covered:
                raise PolicyLoadError(
                    f"LeRobot policy folder {folder}: config.json normalises {key} ({mode}) but "
                    f"{file} holds no statistics for it (it has {sorted(covered) or 'none'}); "
                    "rename features in config.json and in the processors together"
                )


def _statistics(folder: Path, file: str) -> set[str]:
    """The features the normaliser step of processor `file` has statistics for, and lists
    among its features (it normalises only those)."""
    try:
        pipeline = json.loads((folder / file).read_text(encoding="utf-8"))
        (step,) = [s for s in pipeline["steps"] if s.get("registry_name") == NORMALISERS[file]]
        features = set(step["config"]["features"])
        names = _tensor_names(folder / step["state_file"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise PolicyLoadError(
            f"LeRobot policy folder {folder}: {file} has no readable {NORMALISERS[file]} step "
            f"with its statistics ({type(exc).__name__}: {exc})"
        ) from None
    return features & {name.rsplit(".", 1)[0] for name in names}


def _tensor_names(path: Path) -> list[str]:
    """The tensor names of a safetensors file, from its header (8 bytes of length, then JSON)."""
    with path.open("rb") as file:
        size = int.from_bytes(file.read(8), "little")
        if not 2 <= size <= 100_000_000:
            raise ValueError(f"{path.name} is not a safetensors file")
        header = json.loads(file.read(size))
    return [name for name in header if name != "__metadata__"]


def _spec_of(folder: Path, config: dict[str, Any]) -> LeRobotFolder:
    where = folder / "config.json"
    policy_type = config.get("type")
    if policy_type not in HORIZON_FIELDS:
        raise PolicyLoadError(
            f"{where}: policy type {policy_type!r} is not served; served: "
            f"{', '.join(HORIZON_FIELDS)}"
        )
    inputs = _features(config, "input_features", where)
    outputs = _features(config, "output_features", where)
    visual = _cameras(inputs, where)
    state = _state(inputs, visual, where)
    action_dim = _action_dim(outputs, where)
    if state is not None and len(state) != 1:
        raise PolicyLoadError(f"{where}: {STATE_KEY} must have shape [dim], got {state}")
    horizon = _horizon(config, policy_type, where)
    steps = config.get("num_inference_steps") if policy_type == "diffusion" else None
    return LeRobotFolder(
        path=folder,
        policy_type=policy_type,
        cameras=tuple(key.removeprefix(IMAGE_PREFIX) for key in visual),
        image_sizes=tuple((shape[1], shape[2]) for shape in visual.values()),
        state_dim=state[0] if state is not None else None,
        action_dim=action_dim,
        horizon=horizon,
        num_inference_steps=steps if isinstance(steps, int) else None,
    )


def _action_dim(outputs: dict[str, tuple[str, tuple[int, ...]]], where: Path) -> int:
    """The length of the one action output, of shape [dim]."""
    if ACTION_KEY not in outputs or len(outputs[ACTION_KEY][1]) != 1:
        raise PolicyLoadError(f"{where}: output_features needs {ACTION_KEY!r} of shape [dim]")
    return outputs[ACTION_KEY][1][0]


def _horizon(config: dict[str, Any], policy_type: str, where: Path) -> int:
    """The chunk length the policy type keeps under its own name (`HORIZON_FIELDS`)."""
    horizon_field = HORIZON_FIELDS[policy_type]
    horizon = config.get(horizon_field)
    if not isinstance(horizon, int) or isinstance(horizon, bool) or horizon < 1:
        raise PolicyLoadError(f"{where}: {horizon_field} must be a positive integer")
    return horizon


def _cameras(
    inputs: dict[str, tuple[str, tuple[int, ...]]], where: Path
) -> dict[str, tuple[int, ...]]:
    """The input features that are cameras ({key: [3, height, width]}): at least one, each
    named ``observation.images.NAME``."""
    visual = {key: shape for key, (kind, shape) in inputs.items() if kind == "VISUAL"}
    if not visual:
        raise PolicyLoadError(f"{where}: input_features has no VISUAL feature (no camera)")
    for key, shape in visual.items():
        if not key.startswith(IMAGE_PREFIX) or len(shape) != 3 or shape[0] != 3:
            raise PolicyLoadError(
                f"{where}: camera feature {key!r} of shape {shape}; expected "
                f"{IMAGE_PREFIX}NAME of shape [3, height, width]"
            )
    return visual


def _state(
    inputs: dict[str, tuple[str, tuple[int, ...]]],
    visual: dict[str, tuple[int, ...]],
    where: Path,
) -> tuple[int, ...] | None:
    """The state feature's shape (None without one), once nothing but cameras and the state is
    asked for."""
    others = sorted(set(inputs) - set(visual) - {STATE_KEY})
    if others:
        raise PolicyLoadError(f"{where}: input features {others} are not served (only cameras "
                              f"and {STATE_KEY})")  # fmt: skip
    state = inputs.get(STATE_KEY)
    return None if state is None else state[1]


def _features(
    config: dict[str, Any], name: str, where: Path
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``config[name]`` as {key: (type, shape)}; `PolicyLoadError` when it is malformed."""
    table = config.get(name)
    if not isinstance(table, dict):
        raise PolicyLoadError(f"{where}: {name} must be an object of features")
    features = {}
    for key, feature in table.items():
        read = _feature(feature)
        if read is None:
            raise PolicyLoadError(f"{where}: {name}[{key!r}] needs a type and a shape of sizes")
        features[key] = read
    return features


def _feature(feature: Any) -> tuple[str, tuple[int, ...]] | None:
    """A feature's ``(type, shape)``, or None unless it has a type and a shape of sizes."""
    shape = feature.get("shape") if isinstance(feature, dict) else None
    kind = feature.get("type") if isinstance(feature, dict) else None
    if not isinstance(kind, str) or not isinstance(shape, list):
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
        return None
    return kind, tuple(shape)


class LeRobotPolicy(Policy):
    """A LeRobot pretrained folder (ACT or Diffusion; extra lerobot), run as its PolicyServer.

    `path` is the folder ``save_pretrained`` wrote; `device` is ``auto`` (CUDA when there is
    one), ``cpu``, ``cuda`` or ``mps``.
    """

    def __init__(self, *, path: str, device: str = "auto") -> None:
        check_choice("device", device, DEVICES)
        self.folder = read_folder(path)
        self.device_name = device
        folder = self.folder
        sizes = set(folder.image_sizes)
        self._spec = PolicySpec(
            family="lerobot",
            action_horizon=folder.horizon,
            action_dim=folder.action_dim,
            camera_names=folder.cameras,
            camera_aliases={IMAGE_PREFIX + name: name for name in folder.cameras},
            image_size=sizes.pop() if len(sizes) == 1 else None,
            state_dim=folder.state_dim,
            state_required=folder.state_dim is not None,
            num_inference_steps=folder.num_inference_steps,
            about={"type": folder.policy_type, "path": str(folder.path)},
        )
        self._loaded: _Loaded | None = None
        self._timings: dict[str, float] = {}

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def __getstate__(self) -> dict[str, Any]:
        """Settings only: the worker loads the folder itself in `load()`."""
        return {**self.__dict__, "_loaded": None}

    def load(self) -> None:
        """The policy class and its processors from the folder, on the chosen device."""
        self._loaded = _Loaded(self.folder, self.device_name)

    def warm_up(self, example: PolicyInput) -> None:
        """One step on the announced shapes, so the first robot does not pay for the first
        pass (allocations, kernel choice)."""
        self.infer(example)

    def batch_timings(self) -> Mapping[str, float]:
        """``model_ms``: the policy's own time (predict_action_chunk) in the last batch."""
        return self._timings

    def infer(self, observation: PolicyInput) -> np.ndarray:
        return self.infer_batch([observation])[0]

    def infer_batch(self, observations: Sequence[PolicyInput]) -> list[np.ndarray]:
        """One step per observation, in turn, as PolicyServer runs them (batch size 1 keeps
        each chunk equal to LeRobot's own)."""
        if self._loaded is None:
            self.load()
        assert self._loaded is not None
        chunks, model_ms = [], 0.0
        for observation in observations:
            horizon = observation.action_horizon or self._spec.action_horizon
            chunk, step_ms = self._loaded.step(observation, horizon)
            chunks.append(chunk)
            model_ms += step_ms
        self._timings = {"model_ms": model_ms}
        return chunks

    def close(self) -> None:
        self._loaded = None


class _Loaded:
    """The loaded policy and processors, and one step through them as PolicyServer runs it."""

    def __init__(self, folder: LeRobotFolder, device_name: str) -> None:
        import torch
        from lerobot.async_inference.helpers import raw_observation_to_observation
        from lerobot.datasets.utils import hw_to_dataset_features
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        if device_name == "auto":
            device_name = "cuda" if torch.cuda.is_available() else "cpu"
        self.torch = torch
        self.to_observation = raw_observation_to_observation
        self.folder = folder
        policy = get_policy_class(folder.policy_type).from_pretrained(str(folder.path))
        self.policy = policy.to(device_name).eval()
        device = {"device": device_name}
        self.preprocessor, self.postprocessor = make_pre_post_processors(
            self.policy.config,
            pretrained_path=str(folder.path),
            preprocessor_overrides={"device_processor": device},
            postprocessor_overrides={"device_processor": device},
        )
        # The robot's features as PolicyServer gets them from its client: one float per state
        # value (named state_0...), one (height, width, 3) frame per camera.
        self.state_names = [f"state_{i}" for i in range(folder.state_dim or 0)]
        hardware: dict[str, Any] = dict.fromkeys(self.state_names, float)
        for name, (height, width) in zip(folder.cameras, folder.image_sizes, strict=True):
            hardware[name] = (height, width, 3)
        self.features = hw_to_dataset_features(hardware, "observation", use_video=False)

    def step(self, observation: PolicyInput, horizon: int) -> tuple[np.ndarray, float]:
        """The postprocessed ``[horizon, D]`` chunk for `observation`, and the model's ms."""
        torch = self.torch
        raw: dict[str, Any] = {name: _writable(f) for name, f in observation.images.items()}
        if observation.state is not None:
            raw.update(zip(self.state_names, observation.state.reshape(-1).tolist(), strict=True))
        if observation.task:
            raw["task"] = observation.task
        with torch.no_grad():
            prepared = self.to_observation(raw, self.features, self.policy.config.image_features)
            batch = self.preprocessor(prepared)
            start = time.perf_counter()
            if observation.seed is not None:
                torch.manual_seed(observation.seed)
            actions = self._chunk(batch)[:, :horizon, :]
            if actions.device.type == "cuda":
                torch.cuda.synchronize(actions.device)
            model_ms = (time.perf_counter() - start) * 1000
            steps = [self.postprocessor(actions[:, i, :]) for i in range(actions.shape[1])]
            chunk = torch.stack(steps, dim=1).squeeze(0)
        return chunk.detach().float().cpu().numpy(), model_ms

    def _chunk(self, batch: dict[str, Any]) -> Any:
        """``[1, H, D]`` actions: ``predict_action_chunk`` for ACT; for Diffusion, an
        episode's first ``select_action`` (which fills the observation queues and predicts)
        and the rest of the actions it queued."""
        if self.folder.policy_type != "diffusion":
            return self.policy.predict_action_chunk(batch)
        self.policy.reset()
        first = self.policy.select_action(dict(batch))
        queued = list(self.policy._queues["action"])
        return self.torch.stack([first, *queued], dim=1)


def _writable(frame: np.ndarray) -> np.ndarray:
    """`frame`, copied when it is a read-only view (of the worker's shared memory), since
    LeRobot hands it to ``torch.tensor``."""
    return frame if frame.flags.writeable else frame.copy()
