"""`reply_size_limit`: the reply cap a client sizes from a server's metadata when no
``max_reply_bytes`` is given. Room for the announced chunk at 64 bytes a value, never under the
1 MiB floor, and the floor for metadata that announces no chunk or an absurd one, so a server
cannot lift the cap that protects the client's memory. The transports' use of it, over real
servers, is in tests/transports/test_hostile_servers.py."""

from __future__ import annotations

from typing import Any

import pytest

from vla_client.errors import ProtocolError
from vla_client.protocol import REPLY_SIZE_FLOOR, read_metadata, reply_size_limit
from vla_client.protocol.reply_read import BYTES_PER_ACTION_VALUE


def output(**sizes: Any) -> dict[str, Any]:
    return {"object": "action.metadata", "output": sizes}


def test_the_floor_is_one_mib_and_a_value_gets_64_bytes() -> None:
    assert (REPLY_SIZE_FLOOR, BYTES_PER_ACTION_VALUE) == (1 << 20, 64)


@pytest.mark.parametrize(
    ("horizon", "dim", "padded", "limit"),
    [
        (1024, 64, None, 1024 * 64 * 64),  # 4 MiB
        (1024, 7, 32, 1024 * 32 * 64),  # the padded dim when it is larger
        (1024, 32, 16, 1024 * 32 * 64),  # the action dim when the padded one is smaller
        (1024, None, 32, 1024 * 32 * 64),  # the padded dim alone
        (129, 128, None, 129 * 128 * 64),  # one row over the floor
        (128, 128, None, REPLY_SIZE_FLOOR),  # exactly the floor
        (50, 7, 32, REPLY_SIZE_FLOOR),  # a small chunk: the floor
        (1024, 1024, None, 1 << 26),  # the largest unpadded chunk, 1 << 20 values: 64 MiB
        (1024, 1, 1024, 1 << 26),  # the largest padded chunk
    ],
)
def test_the_cap_has_room_for_the_announced_chunk(
    horizon: int, dim: int | None, padded: int | None, limit: int
) -> None:
    metadata = output(action_horizon=horizon, action_dim=dim, padded_action_dim=padded)
    assert reply_size_limit(metadata) == limit


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        [],
        "metadata",
        {},
        {"output": None},
        {"output": [1024, 64]},
        output(),
        output(action_horizon=65536),  # no dim: nothing to size from
        output(action_dim=65536, padded_action_dim=65536),  # no horizon
        output(action_horizon=0, action_dim=4096),  # out of bounds: refused on reading
        output(action_horizon=4096, action_dim=-1),
        output(action_horizon=4096, action_dim=4096.0),
        output(action_horizon="4096", action_dim=4096),
        output(action_horizon=4096, action_dim=True),
        output(action_horizon=65537, action_dim=1),
        output(action_horizon=2048, action_dim=1024),  # a chunk over 1 << 20 values
    ],
)
def test_metadata_without_a_sane_chunk_gets_the_floor(metadata: Any) -> None:
    assert reply_size_limit(metadata) == REPLY_SIZE_FLOOR


@pytest.mark.parametrize("horizon, padded", [(65536, 65536), (2048, 1024), (1025, 1024)])
def test_a_padded_chunk_over_the_limit_gets_the_floor(horizon: int, padded: int) -> None:
    # Before, the bounds covered only the unpadded chunk: 65536 x 65536 padded values lifted the
    # cap to 256 GiB.
    metadata = output(action_horizon=horizon, action_dim=1, padded_action_dim=padded)
    assert reply_size_limit(metadata) == REPLY_SIZE_FLOOR
    with pytest.raises(ProtocolError, match="padded action chunks, over the limit"):
        read_metadata(metadata)  # and a client refuses such metadata when it reads it
