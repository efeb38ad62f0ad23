"""How each field of the metadata document is read, and the bounds its sizes and counts keep.

One function per field, each taking the value as it came off the wire and giving it in the one
form the rest of the code uses, or raising `ProtocolError` saying which field is wrong and why.
The metadata model (`vla_client.protocol.models.ActionMetadata`) calls them from its validators,
so the server building its document, the client reading a server's and the client's fit all
read a field the same way; `check_metadata_bounds` runs only their size and count checks over a
raw document. Plain Python, no pydantic: a transport sizing its reply cap needs no models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vla_client.errors import ProtocolError

MAX_METADATA_PIXELS = 4096 * 4096
"""Largest frame (height x width) a server may announce: the reference server's own default
``max_image_pixels`` (`vla_client.codecs.DEFAULT_MAX_PIXELS`, not imported here: that would
load the image libraries with the models). A client pads frames to the announced size, so a
larger claim would have it allocate whatever the server said."""
MAX_METADATA_CAMERAS = 16
"""Most cameras a server may announce, the reference server's own ``max_cameras``."""
MAX_METADATA_DIM = 65536
"""Largest action horizon, action dim or state dim a server may announce."""
MAX_METADATA_ACTION_VALUES = 1 << 20
"""Largest action chunk (horizon x dim) a server may announce."""
CHANNEL_COUNTS = (1, 3, 4)
"""The last entry of a three-entry `image_size` that makes it ``[H, W, C]`` (else ``[C, H, W]``)."""
_METADATA_DIMS = (
    ("input", "state_dim", 0),
    ("output", "action_horizon", 1),
    ("output", "action_dim", 1),
    ("output", "padded_action_dim", 1),
)
"""Counts in the metadata: their block, name and least value (a policy may take no state)."""
LEAST_DIM = {name: least for _, name, least in _METADATA_DIMS}
"""The least value of each count, by its name."""


def read_dim(where: str, value: Any, least: int) -> int | None:
    """Count `where` (``block.name``): None when absent, else a whole number in
    ``least..MAX_METADATA_DIM`` (not a bool, a float or a numeric string)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"metadata {where} must be a whole number, got {value!r}")
    if not least <= value <= MAX_METADATA_DIM:
        raise ProtocolError(f"metadata {where} is {value}, outside {least}..{MAX_METADATA_DIM}")
    return value


def check_chunk(horizon: int | None, dim: int | None, padded_dim: int | None = None) -> None:
    """`ProtocolError` when an action chunk of `horizon` x `dim` is over the limit, or of
    `horizon` x `padded_dim` (a server may return its chunk padded to that width)."""
    if horizon is None:
        return
    for width, what in ((dim, ""), (padded_dim, "padded ")):
        if width is not None and horizon * width > MAX_METADATA_ACTION_VALUES:
            raise ProtocolError(
                f"metadata announces {horizon} x {width} {what}action chunks, over the limit "
                f"of {MAX_METADATA_ACTION_VALUES} values"
            )


def read_image_keys(value: Any) -> list[str]:
    """``input.image_keys``: a list of camera names (absent or null: any names), at most
    `MAX_METADATA_CAMERAS`."""
    if value is None:
        return []
    if not isinstance(value, list | tuple) or not all(isinstance(k, str) for k in value):
        raise ProtocolError(f"metadata input.image_keys must be a list of names, got {value!r}")
    _check_camera_count(value)
    return list(value)


def _check_camera_count(keys: list[Any] | tuple[Any, ...]) -> None:
    if len(keys) > MAX_METADATA_CAMERAS:
        raise ProtocolError(
            f"metadata announces {len(keys)} cameras, over the limit of {MAX_METADATA_CAMERAS}"
        )


def read_camera_aliases(value: Any) -> dict[str, str]:
    """``input.camera_aliases``: other camera name -> the announced name it stands for
    (absent or null: none)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProtocolError(f"metadata input.camera_aliases must be an object, got {value!r}")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ProtocolError(
            f"metadata input.camera_aliases must map names to names, got {dict(value)!r}"
        )
    return dict(value)


DEPTH_DTYPES = ("uint16", "float32")
"""The dtypes a depth camera may announce (`vla_client.codecs.depth.DEPTH_DTYPES`: codecs
are not imported here)."""


def read_depth_cameras(value: Any) -> dict[str, str]:
    """``input.depth_cameras``: each depth camera's name -> the dtype of its frames,
    ``"uint16"`` (millimetres) or ``"float32"`` (metres); absent or null: none (a server that
    predates depth takes none). At most `MAX_METADATA_CAMERAS`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and v in DEPTH_DTYPES for k, v in value.items()
    ):
        raise ProtocolError(
            "metadata input.depth_cameras must map camera names to "
            f"{' or '.join(DEPTH_DTYPES)}, got {value!r}"
        )
    _check_camera_count(list(value))
    return dict(value)


def read_image_size_required(value: Any) -> bool:
    """``input.image_size_required``: true only when it is JSON ``true``; anything else
    (absent, null, ``"true"``, ``1``) announces a size without requiring it."""
    return value is True


def parse_image_size(value: object) -> tuple[int, int] | None:
    """(height, width) from metadata's `image_size`: ``224``, ``[H, W]``, ``[H, W, C]``,
    ``[C, H, W]`` or ``{"height": H, "width": W}``; None when absent.

    `ProtocolError` unless its entries are positive whole numbers making a height and a width
    of at most `MAX_METADATA_PIXELS` together. A side under the client's least resize is not
    refused here: the client's fit says so (a `ContractError`).
    """
    if value is None:
        return None
    entries = _size_entries(value)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in entries):
        raise ProtocolError(f"metadata image_size {value!r} must be positive whole numbers")
    if len(entries) == 3:
        entries = entries[:2] if entries[2] in CHANNEL_COUNTS else entries[1:]
    if len(entries) != 2:
        raise ProtocolError(f"metadata image_size {value!r} is not a height and width")
    height, width = entries
    if height * width > MAX_METADATA_PIXELS:
        raise ProtocolError(
            f"metadata image_size {value!r} is over the limit of {MAX_METADATA_PIXELS} pixels"
        )
    return height, width


def _size_entries(value: object) -> list[Any]:
    """An image size's entries as a list: a map's height and width, a list's items, or one
    number twice (a square)."""
    if isinstance(value, Mapping):
        return [value.get("height"), value.get("width")]
    if isinstance(value, list | tuple):
        return list(value)
    return [value, value]


def check_metadata_bounds(metadata: Mapping[str, Any]) -> None:
    """`ProtocolError` unless the sizes and counts in `metadata` are sane, read before anything
    is sized from them: whole dims within ``0..MAX_METADATA_DIM`` (actions at least 1), an
    ``image_size`` of positive sides within `MAX_METADATA_PIXELS`, at most
    `MAX_METADATA_CAMERAS` image keys and an action chunk (padded or not) within
    `MAX_METADATA_ACTION_VALUES`.
    Absent fields are fine, and so are blocks and lists of another form: the metadata model
    refuses those when it reads the document (`vla_client.protocol.models.read_metadata`)."""
    blocks = {name: metadata.get(name) for name in ("input", "output")}
    spec = blocks["input"] if isinstance(blocks["input"], Mapping) else {}
    output = blocks["output"] if isinstance(blocks["output"], Mapping) else {}
    for block, field_name, least in _METADATA_DIMS:
        source = output if block == "output" else spec
        read_dim(f"{block}.{field_name}", source.get(field_name), least)
    check_chunk(
        output.get("action_horizon"), output.get("action_dim"), output.get("padded_action_dim")
    )
    keys = spec.get("image_keys")
    if isinstance(keys, list | tuple):
        _check_camera_count(keys)
    parse_image_size(spec.get("image_size"))
