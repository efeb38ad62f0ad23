"""Seeing what the robot saw and did: Rerun logs of a control loop, a ``send`` run or a recording.

`RerunLog` logs, on a background thread, each camera frame as sent, the state and applied action
per joint, each chunk as the planned future of every joint, per-stage latency and the safety
gate's and watchdog's events; `recording_to_rerun` turns a ``.vlaobs`` recording into an ``.rrd``
file. Rerun (``pip install 'vla-client[rerun]'``) is imported when a log is made, never by
``import vla_client``.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.viz.rerun_log import RerunLog as RerunLog
    from vla_client.viz.rerun_recording import recording_to_rerun as recording_to_rerun

_FACE = {
    "RerunLog": "vla_client.viz.rerun_log",
    "recording_to_rerun": "vla_client.viz.rerun_recording",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)
