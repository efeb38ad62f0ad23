"""OpenCV's own log is off while a command runs, whichever OpenCV is installed.

OpenCV 5 has ``cv2.utils.logging``; the 4.x wheels (4.12 is what LeRobot 0.4.4's ``<4.13`` pin
resolves to) have only the top-level ``cv2.getLogLevel``/``setLogLevel``, and every command
once crashed there. CI also runs the CLI under the lowest accepted OpenCV itself (.ci/run).
"""

from __future__ import annotations

import cv2
import pytest

from vla_client.cli import main

SILENT = cv2.utils.logging.LOG_LEVEL_SILENT


def test_a_command_silences_opencv_4_through_its_top_level_functions(monkeypatch):
    logging = cv2.utils.logging
    levels: list[int] = []

    def set_level(level: int) -> None:
        levels.append(level)
        logging.setLogLevel(level)

    # the OpenCV 4.x layout, with OpenCV's real functions behind it
    monkeypatch.delattr(cv2.utils, "logging")
    monkeypatch.setattr(cv2, "getLogLevel", logging.getLogLevel, raising=False)
    monkeypatch.setattr(cv2, "setLogLevel", set_level, raising=False)
    before = logging.getLogLevel()
    assert main(["cameras"]) == 0
    assert levels == [SILENT, before]  # off for the command, then as it was


@pytest.mark.parametrize("verbose", [False, True])
def test_opencv_5_log_is_off_during_a_command_and_kept_with_verbose(monkeypatch, verbose):
    logging = cv2.utils.logging
    seen: list[int] = []
    import vla_client.cli.cameras as cameras_command

    real = cameras_command.run
    monkeypatch.setattr(
        cameras_command, "run", lambda args: seen.append(logging.getLogLevel()) or real(args)
    )
    before = logging.getLogLevel()
    main(["-v", "cameras"] if verbose else ["cameras"])
    assert seen == [before if verbose else SILENT]
    assert logging.getLogLevel() == before
