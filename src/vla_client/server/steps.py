"""The request steps both the HTTP and the websocket routes take after decoding.

Checking a decoded request against the policy, running it under a time limit, and building the
reply document: one implementation, so the two transports cannot drift apart.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import HTTPException

from vla_client.codecs import frame_digest
from vla_client.protocol import DecodedRequest, build_envelope, build_raw, new_request_id
from vla_client.server.inference import RequestMemory, Runner
from vla_client.server.limits import within
from vla_client.server.policy import Policy, PolicyInput


async def infer_with_timeout(
    runner: Runner,
    observation: PolicyInput,
    timeout_s: float,
    memory: RequestMemory | None = None,
) -> tuple[Any, dict[str, float]]:
    """The runner's answer, or 504 when it takes longer than `timeout_s`."""
    try:
        return await within(timeout_s, runner.infer(observation, memory))
    except asyncio.TimeoutError:  # a distinct class before Python 3.11
        raise HTTPException(504, f"inference did not finish within {timeout_s:g} s") from None


def policy_input(decoded: DecodedRequest, policy: Policy) -> PolicyInput:
    """The arrays-only observation for `policy`, or 400 naming unknown or missing cameras."""
    spec = policy.spec
    if not decoded.images:
        raise HTTPException(400, "input.observation.images: the observation has no camera images")
    if spec.camera_names:
        unknown = sorted(set(decoded.images) - set(spec.camera_names))
        missing = sorted(set(spec.camera_names) - set(decoded.images))
        if unknown or missing:
            raise HTTPException(
                400,
                f"input.observation.images: unknown cameras {unknown}, missing cameras {missing}; "
                f"this policy takes {list(spec.camera_names)}",
            )
    if (
        decoded.state is not None
        and spec.state_dim is not None
        and decoded.state.size != spec.state_dim
    ):
        raise HTTPException(
            400,
            f"input.observation.state: expected {spec.state_dim} values, got {decoded.state.size}",
        )
    parameters = decoded.parameters
    return PolicyInput(
        images=decoded.images,
        state=decoded.state,
        task=decoded.task,
        action_horizon=parameters.action_horizon,
        num_inference_steps=parameters.num_inference_steps,
        seed=parameters.seed,
    )


def reply_document(
    decoded: DecodedRequest, actions: Any, model: str, policy: Policy
) -> dict[str, Any]:
    """The envelope or raw reply the request asked for, with digests when asked."""
    request_id = decoded.request_id or new_request_id()
    numpy_values = decoded.wire == "msgpack" or decoded.output_format == "numpy"
    extra: dict[str, Any] = {}
    if decoded.runtime.return_digest:
        extra["digests"] = {name: frame_digest(frame) for name, frame in decoded.images.items()}
    if decoded.runtime.response_format == "raw":
        return build_raw(
            actions,
            request_id=request_id,
            numpy_values=numpy_values,
            parameters={"num_inference_steps": policy.spec.num_inference_steps},
            extra=extra,
        )
    return build_envelope(
        actions,
        request_id=request_id,
        model=model,
        numpy_values=numpy_values,
        denoise_steps=decoded.parameters.num_inference_steps or policy.spec.num_inference_steps,
        extra=extra,
    )
