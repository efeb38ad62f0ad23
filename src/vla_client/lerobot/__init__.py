"""LeRobot on the robot's side: drive a LeRobot `Robot` from a `ControlLoop`, and export
recordings to LeRobot datasets.

`LeRobotRobot` adapts a robot's `get_observation()` and `send_action()` to the loop's
``observe`` and ``apply_action``; `export_lerobot_dataset` writes a recording (a loop's or a
server's) as a LeRobotDataset v3.0 with LeRobot's own writer (``vla-client export FILE
--lerobot DIR``). Neither imports LeRobot or torch when this package is imported: the adapter
never needs them, the export imports them when it runs.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.lerobot.dataset import ExportSummary as ExportSummary
    from vla_client.lerobot.dataset import export_lerobot_dataset as export_lerobot_dataset
    from vla_client.lerobot.robot import LeRobotRobot as LeRobotRobot

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "ExportSummary": "vla_client.lerobot.dataset",
    "export_lerobot_dataset": "vla_client.lerobot.dataset",
    "LeRobotRobot": "vla_client.lerobot.robot",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)
