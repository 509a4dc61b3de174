"""Sample grids: a PNG of a few dataset rows with captions, for people to look at."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from itertools import islice

from PIL import Image, ImageDraw, ImageFont


def make_sample_grid(
    samples: Sequence[tuple[Image.Image, str]],
    *,
    columns: int = 4,
    thumb_width: int = 240,
    caption_lines: int = 2,
) -> Image.Image:
    """Tile ``(image, caption)`` pairs into one image with the caption under each tile."""
    if not samples:
        raise ValueError("a sample grid needs at least one image")
    font = ImageFont.load_default(size=13)  # Pillow's bundled TrueType font: readable, no system fonts
    line_height = 15
    first = samples[0][0]
    thumb_height = max(1, round(first.height * thumb_width / first.width))
    cell_height = thumb_height + caption_lines * line_height + 6
    columns = min(columns, len(samples))
    rows = (len(samples) + columns - 1) // columns
    grid = Image.new("RGB", (columns * thumb_width, rows * cell_height), "white")
    draw = ImageDraw.Draw(grid)
    chars_per_line = max(8, thumb_width // 7)
    for index, (image, caption) in enumerate(samples):
        x = (index % columns) * thumb_width
        y = (index // columns) * cell_height
        grid.paste(image.convert("RGB").resize((thumb_width, thumb_height), Image.BILINEAR), (x, y))
        lines = wrap_caption(caption, chars_per_line, caption_lines)
        for number, text in enumerate(lines):
            draw.text((x + 3, y + thumb_height + 2 + number * line_height), text, fill="black", font=font)
    return grid


def wrap_caption(caption: str, chars_per_line: int, max_lines: int) -> list[str]:
    """The caption in lines of at most ``chars_per_line`` characters (a longer word stands alone),
    at most ``max_lines`` of them; a cut caption ends in an ellipsis rather than stopping silently."""
    lines, line = [], ""
    for word in caption.split():
        candidate = f"{line} {word}".strip()
        if len(candidate) > chars_per_line and line:
            lines.append(line)
            line = word
        else:
            line = candidate
    lines.append(line)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: chars_per_line - 1].rstrip() + "…"
    return lines


def grid_png(
    samples: Iterable[tuple[Image.Image, str]],
    *,
    limit: int | None = None,
    columns: int = 4,
    thumb_width: int = 240,
    caption_lines: int = 2,
) -> bytes | None:
    """The card's ``grid.png``: the first ``limit`` samples as a grid, or None when there are none.

    ``samples`` may be a lazy generator: only the first ``limit`` images are decoded, so a stage
    can offer its whole dataset and the grid reads no more than it shows.
    """
    chosen = list(islice(samples, limit))
    if not chosen:
        return None
    return png_bytes(make_sample_grid(chosen, columns=columns, thumb_width=thumb_width, caption_lines=caption_lines))


def png_bytes(image: Image.Image) -> bytes:
    """PNG bytes without timestamps, so identical pixels give identical files."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()
