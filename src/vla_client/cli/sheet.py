"""Pictures of frames for people: tiles with labels burned in, laid out in a grid.

``vla-client cameras --grid`` puts one capture of each camera side by side; ``vla-client view``
makes a contact sheet of a recording, one row per step and one column per camera, each tile
labelled with the step's sequence number and time. Text is drawn with OpenCV's Hershey font,
white with a black outline, so it reads on any image; a sheet's title is wrapped at spaces (and
shrunk, for a word wider than the sheet) so that all of it shows however narrow the sheet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import cv2
import numpy as np

FONT = cv2.FONT_HERSHEY_SIMPLEX
SMALLEST_TITLE_SCALE = 0.3
"""The title is never shrunk below this (about 7 pixels a letter): legible, if small."""


def fit_height(image: np.ndarray, height: int) -> np.ndarray:
    """`image` scaled to `height` rows, keeping its aspect ratio."""
    width = max(1, round(image.shape[1] * height / image.shape[0]))
    interpolation = cv2.INTER_AREA if height < image.shape[0] else cv2.INTER_LINEAR
    return cv2.resize(image, (width, height), interpolation=interpolation)


def draw_label(image: np.ndarray, lines: Sequence[str], *, scale: float | None = None) -> None:
    """Burn `lines` of text into the top-left corner of `image` (in place), outlined."""
    scale = scale if scale is not None else max(0.4, image.shape[0] / 400)
    thickness = max(1, round(scale * 2))
    line_height = round(30 * scale)
    for row, text in enumerate(lines):
        origin = (_margin(scale), line_height * (row + 1))
        for colour, width in (((0, 0, 0), thickness + 2), ((255, 255, 255), thickness)):
            cv2.putText(image, text, origin, FONT, scale, colour, width, cv2.LINE_AA)


def label_tile(image: np.ndarray, height: int, lines: Sequence[str]) -> np.ndarray:
    """`image` fitted to `height` with `lines` burned in: one tile of a sheet or grid."""
    tile = fit_height(image, height)
    draw_label(tile, lines)
    return tile


def frame_grid(images: Mapping[str, np.ndarray], tile_height: int = 360) -> np.ndarray:
    """RGB frames scaled to one height, labelled with their names, in a near-square grid."""
    tiles = [label_tile(image, tile_height, [name]) for name, image in images.items()]
    columns = math.ceil(math.sqrt(len(tiles)))
    rows = math.ceil(len(tiles) / columns)
    cell_width = max(tile.shape[1] for tile in tiles)
    canvas = np.zeros((rows * tile_height, columns * cell_width, 3), dtype=np.uint8)
    for index, tile in enumerate(tiles):
        top, left = (index // columns) * tile_height, (index % columns) * cell_width
        canvas[top : top + tile_height, left : left + tile.shape[1]] = tile
    return canvas


def _margin(scale: float) -> int:
    """Pixels left of a label's text (and kept free right of a title's)."""
    return round(8 * scale)


def label_width(text: str, scale: float) -> int:
    """Pixels `text` takes as `draw_label` draws it at `scale`, margins and outline included."""
    thickness = max(1, round(scale * 2)) + 2
    (width, _), _ = cv2.getTextSize(text, FONT, scale, thickness)
    return width + 2 * _margin(scale)


def fit_title(title: str, width: int, scale: float) -> tuple[list[str], float]:
    """`title` as lines that fit `width` pixels, and the scale to draw them at: broken at
    spaces, at a smaller scale (down to `SMALLEST_TITLE_SCALE`) when a word alone is wider
    than `width`, and a word still too wide broken where it must. Every character is kept."""
    words = title.split()
    # text width is not quite proportional to scale (whole-pixel strokes): shrink until it fits
    while (
        scale > SMALLEST_TITLE_SCALE
        and (widest := max(label_width(word, scale) for word in words)) > width
    ):
        scale = max(SMALLEST_TITLE_SCALE, min(scale * width / widest, scale * 0.97))
    lines: list[str] = []
    for word in words:
        if lines and label_width(f"{lines[-1]} {word}", scale) <= width:
            lines[-1] = f"{lines[-1]} {word}"
            continue
        lines.append("")
        for character in word:  # one line per word, unless even it is too wide
            if lines[-1] and label_width(lines[-1] + character, scale) > width:
                lines.append("")
            lines[-1] += character
    return lines, scale


def sheet(
    rows: Sequence[Sequence[np.ndarray | None]], widths: Sequence[int], title: str
) -> np.ndarray:
    """Rows of equally tall tiles (None: an empty cell) in columns `widths` wide, under a title
    bar as tall as the title's lines need. Every tile of column ``c`` must be at most
    ``widths[c]`` wide."""
    height = next(tile.shape[0] for row in rows for tile in row if tile is not None)
    lines, scale = fit_title(title, sum(widths), title_height(height) / 40)
    bar = round(scale * (30 * len(lines) + 10))
    canvas = np.zeros((bar + len(rows) * height, sum(widths), 3), dtype=np.uint8)
    draw_label(canvas[:bar], lines, scale=scale)
    for r, row in enumerate(rows):
        left = 0
        for width, tile in zip(widths, row, strict=True):
            if tile is not None:
                top = bar + r * height
                canvas[top : top + height, left : left + tile.shape[1]] = tile
            left += width
    return canvas


def title_height(tile_height: int) -> int:
    """Rows of a one-line title bar above a sheet of tiles `tile_height` tall (the text's size
    follows it; a title wrapped onto more lines takes more)."""
    return max(24, tile_height // 6)
