"""Quality of service as a ROS user names it, and as rmw_zenoh writes it in a liveliness token.

rmw_zenoh matches every pairing of QoS (Zenoh has no incompatible QoS), so the profile matters
for what the middleware does with the data (best effort may drop, transient local keeps the last
samples for late subscribers) and for what the graph shows (`ros2 topic info -v`), not for
whether two endpoints match.

The token string is rmw_zenoh's ``qos_to_keyexpr``: six ``:``-separated fields (reliability,
durability, history ``kind,depth``, deadline ``s,ns``, lifespan ``s,ns``, liveliness
``kind,s,ns``), each number written only where it differs from rmw_zenoh's default profile
(reliable, volatile, keep last 42, infinite durations, automatic liveliness). The numbers are
rmw's enum values: reliable 1, best effort 2; transient local 1, volatile 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Reliability = Literal["reliable", "best_effort"]
Durability = Literal["volatile", "transient_local"]

_RELIABILITY = {"reliable": 1, "best_effort": 2}
_DURABILITY = {"transient_local": 1, "volatile": 2}
# rmw_zenoh's default profile: the fields a token leaves empty.
_DEFAULT_RELIABILITY = "reliable"
_DEFAULT_DURABILITY = "volatile"
_DEFAULT_DEPTH = 42


@dataclass(frozen=True)
class QoS:
    """A keep-last QoS profile: `reliability`, `durability` and the history `depth` (>= 1)."""

    reliability: Reliability = "reliable"
    durability: Durability = "volatile"
    depth: int = 10

    def __post_init__(self) -> None:
        if self.reliability not in _RELIABILITY:
            raise ValueError(
                f"QoS reliability {self.reliability!r}: use one of {sorted(_RELIABILITY)}"
            )
        if self.durability not in _DURABILITY:
            raise ValueError(
                f"QoS durability {self.durability!r}: use one of {sorted(_DURABILITY)}"
            )
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"QoS depth {self.depth!r}: use a whole number of samples >= 1")

    def token(self) -> str:
        """The profile as rmw_zenoh writes it in an endpoint's liveliness token."""
        reliability = (
            "" if self.reliability == _DEFAULT_RELIABILITY else str(_RELIABILITY[self.reliability])
        )
        durability = (
            "" if self.durability == _DEFAULT_DURABILITY else str(_DURABILITY[self.durability])
        )
        depth = "" if self.depth == _DEFAULT_DEPTH else str(self.depth)
        # history kind (keep last is the default), deadline, lifespan and liveliness as default
        return f"{reliability}:{durability}:,{depth}:,:,:,,"


# ROS's sensor data profile (rmw_qos_profile_sensor_data): cameras and joint states.
SENSOR_DATA = QoS(reliability="best_effort", durability="volatile", depth=5)
# ROS's default profile (rmw_qos_profile_default): commands to controllers.
RELIABLE = QoS(reliability="reliable", durability="volatile", depth=10)
