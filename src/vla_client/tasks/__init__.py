"""Simulated tasks whose cameras see what the robot does, for closed-loop evaluation.

`ReachTask` is the built-in one: a robot chasing a moving target on a table, seen by a ``top``
and a ``wrist`` camera. A task knows nothing of networks or servers (numpy, OpenCV and the
synthetic scene only), so both sides can use it: ``vla-client eval`` drives it as the robot, and
the server's ``reach`` policy reads its camera geometry.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.tasks.reach import ReachSettings as ReachSettings
    from vla_client.tasks.reach import ReachTask as ReachTask

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "ReachSettings": "vla_client.tasks.reach",
    "ReachTask": "vla_client.tasks.reach",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)
