"""Checks of a reply against the observation that was sent."""

from __future__ import annotations

from vla_client.client.result import ActionResult
from vla_client.codecs import frame_digest
from vla_client.errors import ProtocolError
from vla_client.observation import Observation


def mismatched_cameras(observation: Observation, result: ActionResult) -> list[str]:
    """Cameras whose decoded pixels on the server differ from what was sent (needs digests).

    Send with ``return_digest=True``: the server then reports, per camera, the shape, dtype and
    SHA-256 of the pixels it decoded (depth frames' too), which lossless encodings must
    reproduce exactly. They are
    compared with the frames as sent, after the client fitted them to the server (renamed to
    its cameras, resized to its image size: `ActionResult.sent_digests`), so the cameras are
    named as the server names them; a result without those (one made by hand) is compared
    with `observation`'s frames as they are.
    """
    if result.digests is None:
        raise ProtocolError(
            "the reply carries no digests; send with return_digest=True",
            request_id=result.request_id,
        )
    sent = result.sent_digests
    if sent is None:
        frames = {**observation.images, **observation.depth}
        sent = {name: frame_digest(frame) for name, frame in frames.items()}
    return [name for name, digest in sent.items() if result.digests.get(name) != digest]
