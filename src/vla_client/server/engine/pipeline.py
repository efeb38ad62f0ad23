"""The request pipeline: one path from request bytes to reply document, for every route.

Every request takes the same steps, whichever route it came in by (POST generations, the
realtime websocket, openpi's websocket)::

    decode  ->  check against the policy  ->  run (the runner, under a time limit)  ->  reply
                                                                   (and record, if asked)

`Pipeline.decode` turns a body into a `DecodedRequest` (every image an ndarray), and
`Pipeline.answer` does the rest and returns the reply document. Until the policy has started
(`startup`), `answer` refuses with 503 and ``Retry-After``. With a `recorder`, every answered
request is recorded: copies of its frames and state (they may view shared memory that the next
request reuses), its task and parameters, the actions and the timings. Failures are the domain's own
errors (`CodecError` and its kin for bad input, `InvalidObservationError` for an observation
the policy cannot take, `InferenceError` from the runner); the routes only move bytes in and
out and turn those errors into a status at their edge (`failure`). The metadata document is
computed here once, with what the server offers, and never edited afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

import numpy as np
from starlette.concurrency import run_in_threadpool

from vla_client.codecs import frame_digest
from vla_client.errors import (
    CodecError,
    InferenceError,
    InvalidObservationError,
    PolicyFailedError,
)
from vla_client.protocol import (
    FLAT,
    ErrorStatus,
    SamplingParameters,
    Wire,
    dumps,
    error_status,
    loads,
    new_request_id,
    openpi_layout,
    rtc,
    wire_for_content_type,
)
from vla_client.server.config import ServerConfig
from vla_client.server.edge.limits import within
from vla_client.server.edge.metrics import ServerMetrics
from vla_client.server.engine.failure_log import FailureLog, traceback_text
from vla_client.server.engine.inference import RequestMemory, Runner
from vla_client.server.engine.startup import Startup
from vla_client.server.policy import Policy, PolicyInput, PolicySpec, metadata_document
from vla_client.server.recorder import RequestRecorder
from vla_client.server.wire.decode import (
    DecodedRequest,
    decode_image_value,
    decode_payload,
    decode_request,
)
from vla_client.server.wire.reply_build import build_envelope, build_raw

log = logging.getLogger("vla_client.server")

ReplyForm = Literal["asked", "envelope", "raw"]
"""Which reply document: what the request's ``runtime.response_format`` asks (HTTP), or a fixed
form (the realtime websocket answers with the envelope, openpi's with the raw form)."""

_ENCODED_IMAGE_MIN_BYTES = 1024  # smaller images decode in microseconds, inline is fine
_MAX_SEARCH_DEPTH = 6  # deeper documents go to a thread rather than being searched


class Pipeline:
    """The steps every request of a server takes: `policy` run through `runner`."""

    def __init__(self, policy: Policy, runner: Runner, config: ServerConfig) -> None:
        self.policy = policy
        self.runner = runner
        self.config = config
        self.startup = Startup(runner)
        self.recorder: RequestRecorder | None = None
        """Set by the app's lifespan when ``config.record`` asks for recording."""
        self.openpi_layout = openpi_layout(config.openpi_layout)
        self.model = config.model_name or policy.spec.family
        """The model name metadata and replies give: the configured one, else the policy's."""
        self.metadata = metadata_document(
            policy.spec,
            model=self.model,
            websockets=True,
            openpi_layout=self.openpi_layout.name,
        )
        self.handshake = dumps(self.metadata, "msgpack")
        """The metadata as the first frame of every websocket connection."""
        self.failures = FailureLog(log)
        """Where every route's 500s are logged (see `failure`)."""
        self.metrics = ServerMetrics()
        """What ``/metrics`` reports: requests, stage timings, requests in inference."""

    async def decode(
        self, body: bytes | memoryview, content_type: str | None, *, openpi: bool = False
    ) -> DecodedRequest:
        """`decode_request`, in a worker thread only where that lets the event loop run meanwhile.

        Unpacking msgpack and turning its arrays or lists into frames holds the GIL, so a thread
        would only add its hop and wake-up; encoded images are decoded by OpenCV without the
        GIL, so those bodies (and every JSON body: base64 and image decoding) go to a thread.
        An `openpi` request is read in the server's openpi layout.
        """
        limits, keep_jpeg = self.config.limits, self.keeps_jpeg
        wire = wire_for_content_type(content_type)
        if wire == "json":
            return await run_in_threadpool(
                decode_request, body, content_type, limits=limits, keep_jpeg=keep_jpeg
            )
        payload = loads(body, wire)
        if openpi and self.openpi_layout is not FLAT:
            if not isinstance(payload, dict):
                raise CodecError(f"request must be a msgpack map, got {type(payload).__name__}")
            payload = self.openpi_layout.to_flat(payload)
        return await self.decode_document(payload, wire)

    async def decode_document(self, payload: Any, wire: Wire) -> DecodedRequest:
        """`decode` for a parsed document: the ``ipc://`` edge's (its frames put back, as
        arrays in shared memory) and every msgpack body's."""
        limits, keep_jpeg = self.config.limits, self.keeps_jpeg
        if not has_encoded_images(payload):
            return decode_payload(payload, wire, limits=limits)
        return await run_in_threadpool(
            decode_payload, payload, wire, limits=limits, keep_jpeg=keep_jpeg
        )

    @property
    def keeps_jpeg(self) -> bool:
        """Whether JPEG frames go to the policy encoded, for it to decode on its device: when
        the started policy asks (`Policy.decodes_jpeg`), unless requests are recorded or
        frame sizes enforced, which need the pixels here."""
        return (
            self.runner.decodes_jpeg
            and self.recorder is None
            and not self.policy.spec.image_size_required
        )

    async def answer(
        self,
        decoded: DecodedRequest,
        *,
        form: ReplyForm,
        started: float,
        memory: RequestMemory | None = None,
    ) -> dict[str, Any]:
        """Check `decoded` against the policy, run it and build its reply document.

        `started` is the `time.perf_counter()` at which the request arrived (for the timings);
        `memory` is what the runner lent the request's body, if anything.
        """
        preprocess_ms = (time.perf_counter() - started) * 1000
        self.startup.check()
        observation = policy_input(decoded, self.policy)
        timeout_s = self.config.infer_timeout_s
        self.metrics.in_inference += 1
        try:
            actions, stage_timings = await within(timeout_s, self.runner.infer(observation, memory))
        except asyncio.TimeoutError:  # a distinct class before Python 3.11
            raise InferenceError(504, f"inference did not finish within {timeout_s:g} s") from None
        finally:
            self.metrics.in_inference -= 1
        post_start = time.perf_counter()
        if decoded.runtime.return_digest:  # hashing every frame takes milliseconds
            reply = await run_in_threadpool(self.reply_document, decoded, actions, form)
        else:  # a few hundred values: cheaper than the hop to a thread and back
            reply = self.reply_document(decoded, actions, form)
        end = time.perf_counter()
        timings = {
            "preprocess_ms": preprocess_ms,
            **stage_timings,
            "postprocess_ms": (end - post_start) * 1000,
            "total_ms": (end - started) * 1000,
        }
        self.metrics.observe(timings)

        if observation.rtc is not None:  # refused earlier unless the policy applies it
            reply[rtc.CAPABILITY] = observation.rtc.echo()
        if decoded.runtime.return_timing:
            reply["timings"] = timings
        if self.recorder is not None:
            self.record(self.recorder, decoded, actions, timings)
        return reply

    @staticmethod
    def record(
        recorder: RequestRecorder, decoded: DecodedRequest, actions: Any, timings: dict[str, float]
    ) -> None:
        """Queue the request for `recorder`, with copies of what may view shared memory."""
        state = None if decoded.state is None else np.array(decoded.state)
        recorder.record(
            {name: np.array(frame) for name, frame in decoded.images.items()},
            state,
            decoded.task,
            decoded.parameters.model_dump(exclude_none=True),
            np.array(actions),
            timings,
            request_id=decoded.request_id,
            depth={name: np.array(frame) for name, frame in decoded.depth.items()},
        )

    def reply_document(
        self, decoded: DecodedRequest, actions: Any, form: ReplyForm
    ) -> dict[str, Any]:
        """The envelope or raw reply for `decoded`, with digests when asked."""
        spec = self.policy.spec
        request_id = decoded.request_id or new_request_id()
        numpy_values = decoded.wire == "msgpack" or decoded.output_format == "numpy"
        extra: dict[str, Any] = {}
        if decoded.runtime.return_digest:  # of the pixels, also of frames the policy decoded
            extra["digests"] = {
                name: frame_digest(
                    decode_image_value(frame.tobytes()) if frame.ndim == 1 else frame
                )
                for name, frame in decoded.images.items()
            }
            extra["digests"].update(
                {name: frame_digest(frame) for name, frame in decoded.depth.items()}
            )
        chosen = decoded.runtime.response_format if form == "asked" else form
        if chosen == "raw":
            return build_raw(
                actions,
                request_id=request_id,
                numpy_values=numpy_values,
                parameters={"num_inference_steps": spec.num_inference_steps},
                extra=extra,
            )
        return build_envelope(
            actions,
            request_id=request_id,
            model=self.model,
            numpy_values=numpy_values,
            denoise_steps=decoded.parameters.num_inference_steps or spec.num_inference_steps,
            extra=extra,
        )


def policy_input(decoded: DecodedRequest, policy: Policy) -> PolicyInput:
    """The arrays-only observation for `policy`; `InvalidObservationError` naming unknown or
    missing cameras, a state of the wrong size, or none where the policy needs one."""
    spec = policy.spec
    images = _camera_images(decoded, spec)
    depth = depth_frames(decoded, spec)
    _check_frame_sizes({**images, **depth}, spec)
    _check_state(decoded.state, spec)
    parameters = decoded.parameters
    check_sizes(parameters, spec)
    return PolicyInput(
        images={**images, **depth},
        state=decoded.state,
        task=decoded.task,
        action_horizon=parameters.action_horizon,
        num_inference_steps=parameters.num_inference_steps,
        seed=parameters.seed,
        rtc=_rtc(decoded, spec),
    )


def _camera_images(decoded: DecodedRequest, spec: PolicySpec) -> dict[str, np.ndarray]:
    """The request's colour frames by the policy's camera names (its aliases resolved);
    `InvalidObservationError` for no frames at all, or for cameras the policy does not take
    or lacks."""
    if not decoded.images and not (decoded.depth and spec.depth_cameras):
        raise InvalidObservationError(
            "input.observation.images: the observation has no camera images"
        )
    images = {spec.camera_aliases.get(name, name): frame for name, frame in decoded.images.items()}
    if spec.camera_names:
        unknown = sorted(set(images) - set(spec.camera_names))
        missing = sorted(set(spec.camera_names) - set(images))
        if unknown or missing:
            raise InvalidObservationError(
                f"input.observation.images: unknown cameras {unknown}, missing cameras {missing}; "
                f"this policy takes {list(spec.camera_names)}"
            )
    return images


def _check_frame_sizes(frames: dict[str, np.ndarray], spec: PolicySpec) -> None:
    """`InvalidObservationError` naming the `frames` not of the size a policy requires."""
    if spec.image_size_required and spec.image_size is not None:
        wrong = {
            name: list(f.shape[:2]) for name, f in frames.items() if f.shape[:2] != spec.image_size
        }
        if wrong:
            raise InvalidObservationError(
                f"input.observation.images: frames must be {list(spec.image_size)} (height, "
                f"width); got {wrong}"
            )


def _check_state(state: np.ndarray | None, spec: PolicySpec) -> None:
    """`InvalidObservationError` for no state where the policy needs one, or one of the
    wrong size."""
    if state is None and spec.state_required:
        raise InvalidObservationError(
            f"input.observation.state: this policy needs a state of {spec.state_dim} values"
        )
    if state is not None and spec.state_dim is not None and state.size != spec.state_dim:
        raise InvalidObservationError(
            f"input.observation.state: expected {spec.state_dim} values, got {state.size}"
        )


def depth_frames(decoded: DecodedRequest, spec: PolicySpec) -> dict[str, np.ndarray]:
    """The request's depth frames for a policy that declares them all, of the dtypes it
    declares; `InvalidObservationError` (400) naming the cameras and dtypes it takes
    otherwise, in one line. A server whose policy takes no depth refuses every depth frame."""
    given, wanted = decoded.depth, spec.depth_cameras
    where = "input.observation.depth"
    if given and not wanted:
        raise InvalidObservationError(
            f"{where}: this server takes no depth frames (its metadata announces no "
            f"input.depth_cameras); got depth for {sorted(given)}"
        )
    unknown, missing = sorted(set(given) - set(wanted)), sorted(set(wanted) - set(given))
    if unknown or missing:
        raise InvalidObservationError(
            f"{where}: unknown depth cameras {unknown}, missing depth cameras {missing}; "
            f"this policy takes depth {wanted}"
        )
    wrong = {n: f.dtype.name for n, f in given.items() if f.dtype.name != wanted[n]}
    if wrong:
        raise InvalidObservationError(
            f"{where}: depth frames of dtype {wrong}; this policy takes depth {wanted} "
            "(uint16 millimetres, float32 metres; never converted)"
        )
    clash = sorted(set(given) & set(decoded.images))
    if clash:
        raise InvalidObservationError(f"{where}: cameras {clash} are in both images and depth")
    return dict(given)


def check_sizes(parameters: SamplingParameters, spec: PolicySpec) -> None:
    """`CodecError` (400) naming the bound for a request that asks the policy for more than
    it announces: a longer chunk or more denoising steps (see `PolicySpec`)."""
    horizon = parameters.action_horizon
    if horizon is not None:
        limit, name = spec.action_horizon, "output.action_horizon"
        if spec.max_action_horizon is not None:
            limit, name = spec.max_action_horizon, "output.max_action_horizon"
        if horizon > limit:
            raise CodecError(
                f"at most {limit} (the metadata's {name}); got {horizon}",
                field="parameters.action_horizon",
            )
    steps = parameters.num_inference_steps
    if steps is not None:
        most = spec.max_inference_steps or spec.num_inference_steps
        if most is None:
            raise CodecError(
                "this policy takes no denoising steps; leave it out",
                field="parameters.num_inference_steps",
            )
        if steps > most:
            where = "max_inference_steps" if spec.max_inference_steps else "num_inference_steps"
            raise CodecError(
                f"at most {most} (the metadata's defaults.{where}); got {steps}",
                field="parameters.num_inference_steps",
            )


def _rtc(decoded: DecodedRequest, spec: PolicySpec) -> rtc.RTCRequest | None:
    """The request's real-time chunking, refused (400) for a policy that does not announce it:
    a client asking for RTC must not get a plain chunk back as if it were one."""
    request = rtc.read_rtc(
        decoded.parameters.model_extra or {},
        decoded.extras,
        action_dim=spec.action_dim,
        action_horizon=spec.action_horizon,
    )
    if request is not None and rtc.announced(spec.extra_capabilities) is None:
        raise InvalidObservationError(
            "parameters.rtc: this policy does not do real-time chunking (its metadata announces "
            "no capabilities.rtc); send no RTC prefix to it"
        )
    return request


def failure(
    exc: BaseException,
    request_id: str | None,
    failures: FailureLog,
    *,
    send_policy_errors: bool = False,
) -> ErrorStatus:
    """What the client is told about `exc`, logged once here (500s into `failures`, the
    pipeline's) for every route.

    Bad input is logged quietly; a policy failure with its traceback, which ends in the
    exception and its message (formatted in the worker process in the worker layout); anything
    unexpected (a bug) with its traceback, while the client gets only the request id to quote.
    Tracebacks are logged once per distinct failure and repeats counted (`FailureLog`), so a
    policy failing every request does not flood the log. The client of a policy failure gets
    its type, or with `send_policy_errors` its message too (`PolicyFailedError`).
    """
    status = error_status(exc)
    if status is None:
        request_id = request_id or new_request_id()
        failures.record("unhandled error", request_id, traceback_text(exc))
        return ErrorStatus(500, f"internal server error (request {request_id})")
    if isinstance(exc, PolicyFailedError):
        failures.record(f"policy failed ({exc.kind})", request_id, traceback_text(exc))
        return ErrorStatus(500, exc.error_detail) if send_policy_errors else status
    if status.status == 500:
        failures.record(status.detail, request_id, traceback_text(exc))
    else:
        log.info("request %s refused: %s", request_id, status.detail)
    return status


def has_encoded_images(value: Any, depth: int = 0) -> bool:
    """Whether an unpacked msgpack document carries bytes or text big enough to be an image.

    Dicts are searched a few levels deep; a list is judged by its first item, so pixel lists
    are never walked.
    """
    if isinstance(value, bytes | str):
        return len(value) > _ENCODED_IMAGE_MIN_BYTES
    if not isinstance(value, dict | list) or not value:
        return False
    if depth > _MAX_SEARCH_DEPTH:
        return True
    if isinstance(value, dict):
        return any(has_encoded_images(item, depth + 1) for item in value.values())
    return has_encoded_images(value[0], depth + 1)
