"""A contact sheet's title shows whole however narrow the sheet (issue 34: a 500 px sheet cut
it at "...150 step(s) over 1"): wrapped at spaces, shrunk for a word wider than the sheet."""

from __future__ import annotations

import cv2
import pytest

from vla_client.cameras.scene import synthetic_frames
from vla_client.cli.sheet import title_height
from vla_client.observation import Observation
from vla_client.recording import ObservationWriter

TITLE = "naive-100ms-seed11.vlaobs: 150 step(s) over 14.90 s from 2026-12-03T22:10:05+00:00"


@pytest.mark.parametrize("width", [48, 96, 180, 256, 500, 2000])
def test_the_title_fits_in_lines_and_keeps_every_character(width: int) -> None:
    from vla_client.cli.sheet import SMALLEST_TITLE_SCALE, fit_title, label_width

    scale = title_height(180) / 40
    lines, fitted = fit_title(TITLE, width, scale)
    assert "".join(lines).replace(" ", "") == TITLE.replace(" ", "")
    assert SMALLEST_TITLE_SCALE <= fitted <= scale
    assert all(label_width(line, fitted) <= width for line in lines)
    if width >= 500:  # room for the widest word at full size: broken at spaces only
        assert fitted == scale and " ".join(lines) == TITLE
    if width == 2000:
        assert lines == [TITLE]


@pytest.mark.parametrize(("cameras", "size"), [(("pixels",), 96), (("top", "wrist"), 224)])
def test_a_narrow_sheet_shows_its_whole_title(cli, tmp_path, cameras, size) -> None:
    """The sheet is written with nothing drawn at its right edge: no text runs off it."""
    path = tmp_path / "naive-100ms-seed11.vlaobs"
    with ObservationWriter(path) as writer:
        for t in range(150):
            frames = synthetic_frames(cameras, size, size, t=t)
            writer.write(Observation(frames), wall_time=1.8e9 + t / 10)
    out = tmp_path / "sheet.png"
    assert cli("view", str(path), "--out", str(out), "--frames", "2").code == 0
    sheet = cv2.imread(str(out))
    bar = sheet.shape[0] - 2 * 180
    assert sheet.shape[1] == 180 * len(cameras) and bar > title_height(180)  # wrapped
    assert sheet[:bar].any() and not sheet[:bar, -3:].any()
