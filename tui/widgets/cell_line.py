"""A table cell of one line of text, rendered as DataTable renders it, without rich's layout on the way.

DataTable renders every cell through rich's generic path (a `Padding` in a `Styled`, wrapped, split
into lines, cropped and padded twice): most of what an idle second (the ages and countdowns), a `j`
(the cursor's row) or a filter (the rows it shows) costs the queue. A cell that is one line of text
and fits its room needs none of it: its text's segments between the padding, the room filled with
spaces. Anything else (a newline, a tab, a wide or zero-width character, a justified or too-long
text) takes rich's path.
`tests/tui/test_cell_line.py` checks the two give the same segments.
"""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text


def cell_line(cell: Text, width: int, padding: int, console: Console, pre: Style, post: Style,
              ) -> list[Segment] | None:
    """The cell's one line as DataTable's `_render_cell` paints it (`pre` and `post` its styles
    before and after the text's own), or None when only rich's path can say."""
    room = width - 2 * padding
    plain = cell.plain
    width_of_text = cell.cell_len
    if room < 0 or width_of_text > room or len(plain) != width_of_text or "\n" in plain or "\t" in plain \
            or cell.justify not in (None, "default"):
        return None  # too long, a wide or zero-width character, more than one line, justified
    segments: list[Segment] = [Segment(" " * padding)] if padding else []
    if not cell.spans:  # `Text.render` leaves a text's own style to `__rich_console__`'s join
        if plain:
            style = console.get_style(cell.style, default=Style.null()) if cell.style else None
            segments.append(Segment(plain, style))
    else:
        lines = Text("\n").join((cell,)) if cell.style else cell  # its style a span, as rich's path makes it
        segments.extend(segment for segment in lines.render(console) if segment.text)
    if room > width_of_text:
        segments.append(Segment(" " * (room - width_of_text)))
    if padding:
        segments.append(Segment(" " * padding))
    return list(Segment.apply_style(segments, pre, post))
