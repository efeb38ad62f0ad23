"""Which OpenCV wheels are installed, and a clear line when there is more than one.

OpenCV's Python wheels come in four flavours (`OPENCV_DISTRIBUTIONS`) that all install the
same ``cv2/`` package. pip treats them as unrelated, so installing a second one beside the
first (LeRobot brings ``opencv-python-headless``, a tutorial ``opencv-python``) succeeds without
a word: the files of whichever was installed last win, and uninstalling either later deletes
``cv2/`` from under the other. vla-client depends on the headless wheel (no GUI: a robot needs
none, and it needs no X or OpenGL libraries); see docs/install.md, "OpenCV".

`opencv_clash` looks at the installed distributions' metadata only (it never imports cv2), and
is called by ``vla-client cameras``, the command that checks a robot's camera setup, never on
the path that sends frames.
"""

from __future__ import annotations

import importlib.metadata

OPENCV_DISTRIBUTIONS = (
    "opencv-python-headless",
    "opencv-python",
    "opencv-contrib-python-headless",
    "opencv-contrib-python",
)


def installed_opencv() -> dict[str, str]:
    """The OpenCV wheels installed where this interpreter looks, name to version."""
    found = {}
    for name in OPENCV_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def opencv_clash() -> str | None:
    """A line naming the OpenCV wheels when more than one is installed, and what to do;
    None when there is one or none (a system OpenCV, such as ROS's or JetPack's, is no wheel)."""
    found = installed_opencv()
    if len(found) < 2:
        return None
    names = " ".join(found)
    listed = ", ".join(f"{name} {version}" for name, version in found.items())
    return (
        f"{len(found)} OpenCV wheels are installed ({listed}); they all write cv2/, so the "
        f"last one installed won and removing any of them breaks the others. Keep one: "
        f"pip uninstall -y {names} && pip install opencv-python-headless "
        "(docs/install.md, OpenCV)"
    )
