"""A one-line cell rendered without rich's layout (`tui.widgets.cell_line`) gives exactly the segments
DataTable's own path gives (a `Padding` in a `Styled`, rendered to one line of the cell's width): the
same text in the same styles, the mouse's row and column included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.renderables.styled import Styled

from tui.widgets.cell_line import cell_line

CONSOLE = Console(width=300, color_system="truecolor", force_terminal=True)
STYLES = st.sampled_from(["", "bold", "bold red", "yellow", "dim", "italic #ff8800", "reverse", "on blue"])
CHARS = st.text(st.sampled_from([*"ab z…+9/-_ .", "界", "é", "\u200b"]), max_size=24)


def rich_line(cell: Text, width: int, padding: int, pre: Style, post: Style) -> list[Segment]:
    """DataTable's `_render_cell` for a row of height 1."""
    options = CONSOLE.options.update_dimensions(width, 1).update(no_wrap=True)
    padded = Styled(Padding(cell, (0, padding)), pre_style=pre, post_style=post)
    return CONSOLE.render_lines(padded, options)[0]


def painted(line: list[Segment]) -> list[Segment]:
    """What a line paints: empty segments dropped, neighbours of one style joined."""
    return list(Segment.simplify(segment for segment in line if segment.text))


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.tuples(CHARS, STYLES), min_size=0, max_size=4), style=STYLES,
       width=st.integers(0, 40), padding=st.integers(0, 2), row=st.integers(0, 5000),
       pre=STYLES, post=st.sampled_from(["", "on #202020", "#e0e0e0"]))
def test_a_one_line_cell_is_painted_as_datatable_paints_it(
        parts: list[tuple[str, str]], style: str, width: int, padding: int, row: int, pre: str, post: str,
) -> None:
    cell = Text.assemble(*parts, style=style)
    before = Style.parse(pre or "none") + Style.from_meta({"row": row, "column": 3})
    after = Style.parse(post or "none")
    fast = cell_line(cell, width, padding, CONSOLE, before, after)
    if cell.cell_len > width - 2 * padding or len(cell.plain) != cell.cell_len:
        assert fast is None  # cut to fit, or characters not one cell wide: rich's path alone knows how
        return
    assert fast is not None
    assert painted(fast) == painted(rich_line(cell, width, padding, before, after))


def test_a_cell_of_more_than_one_line_or_with_a_tab_takes_rich_path() -> None:
    assert cell_line(Text("a\nb"), 20, 1, CONSOLE, Style(), Style()) is None
    assert cell_line(Text("a\tb"), 20, 1, CONSOLE, Style(), Style()) is None
    assert cell_line(Text("ab", justify="right"), 20, 1, CONSOLE, Style(), Style()) is None
