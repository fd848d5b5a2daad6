"""Untrusted text made visible: every hidden or control code point becomes a token.

Every string a child sends (agent name, command, path, message, session id...) goes through
`sanitize()` before it reaches a widget. Textual's `Content` strips only BEL/BS/VT/FF/CR and passes
ESC, CSI, NUL and bidi controls straight to the terminal (`docs/design/contract.md` § Terminal safety), so
this module maps:

- every Cc except `\\n` and `\\t` (C0, DEL and the C1 range U+0080-U+009F),
- every Cf (bidi embeddings/overrides/isolates, zero-width characters, BOM, soft hyphen, tags),
- Zl / Zp, unassigned (Cn), surrogates (Cs) and private-use (Co) code points,
- whitespace other than the plain space (NBSP, en/em spaces, ideographic space...),
- the remaining default-ignorable code points (variation selectors, Hangul fillers, CGJ...),

to a visible token (`␛` for ESC, `⟨U+202E RLO⟩` style for the rest) and reports that it did, so
the ask is flagged "contains hidden characters". Rendering uses `Content`/`Text` objects only:
markup in child text is never interpreted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text
from textual.content import Content

from core.text import is_hidden as is_hidden

#: Textual style of a token in widgets (theme-aware) and its Rich equivalent for table cells.
TOKEN_STYLE = "bold $text-warning on $warning-muted"  # noqa: S105
TOKEN_RICH_STYLE = "bold black on yellow"  # noqa: S105
NEWLINE_MARK = "⏎"
TAB_MARK = "⇥"

_SHORT_NAMES: dict[int, str] = {
    0x00: "NUL",
    0x07: "BEL",
    0x08: "BS",
    0x0B: "VT",
    0x0C: "FF",
    0x0D: "CR",
    0x7F: "DEL",
    0x85: "NEL",
    0x9B: "CSI",
    0x9D: "OSC",
    0x90: "DCS",
    0x9C: "ST",
    0xA0: "NBSP",
    0xAD: "SHY",
    0x034F: "CGJ",
    0x061C: "ALM",
    0x180E: "MVS",
    0x200B: "ZWSP",
    0x200C: "ZWNJ",
    0x200D: "ZWJ",
    0x200E: "LRM",
    0x200F: "RLM",
    0x2028: "LS",
    0x2029: "PS",
    0x202A: "LRE",
    0x202B: "RLE",
    0x202C: "PDF",
    0x202D: "LRO",
    0x202E: "RLO",
    0x2060: "WJ",
    0x2061: "FA",
    0x2062: "IT",
    0x2063: "IS",
    0x2064: "IP",
    0x2066: "LRI",
    0x2067: "RLI",
    0x2068: "FSI",
    0x2069: "PDI",
    0xFEFF: "BOM",
    0xFFF9: "IAA",
    0xFFFA: "IAS",
    0xFFFB: "IAT",
}
def token_for(char: str) -> str:
    """The visible stand-in for a hidden code point."""
    point = ord(char)
    if point == 0x1B:
        return "␛"
    name = _SHORT_NAMES.get(point)
    label = f"U+{point:04X}"
    return f"⟨{label} {name}⟩" if name else f"⟨{label}⟩"


@dataclass(frozen=True)
class Piece:
    text: str
    kind: str  # "text", "token" (a hidden code point) or "mark" (a visible newline/tab marker)


@dataclass(frozen=True)
class Sanitized:
    """`pieces` in order; `hidden` is True when any code point was replaced by a token."""

    pieces: tuple[Piece, ...]
    hidden: bool

    @property
    def plain(self) -> str:
        """The visible text as one string (tokens included); safe to hand to `notify(markup=False)`."""
        return "".join(p.text for p in self.pieces)

    def content(self, style: str = "", token_style: str = TOKEN_STYLE, mark_style: str = "dim") -> Content:
        """A literal `Content`: no markup is ever parsed from the child's text."""
        parts: list[tuple[str, str]] = []
        for piece in self.pieces:
            if piece.kind == "token":
                parts.append((piece.text, token_style))
            elif piece.kind == "mark":
                parts.append((piece.text, mark_style))
            else:
                parts.append((piece.text, style))
        return Content.assemble(*parts)

    def text(self, style: str = "", token_style: str = TOKEN_RICH_STYLE) -> Text:
        """A literal Rich `Text` (for DataTable cells, which parse markup in `str` cells)."""
        out = Text(no_wrap=True, overflow="ellipsis")
        for piece in self.pieces:
            if piece.kind == "token":
                out.append(piece.text, token_style)
            elif piece.kind == "mark":
                out.append(piece.text, "dim")
            else:
                out.append(piece.text, style)
        return out


def sanitize(value: str | None, *, single_line: bool = False) -> Sanitized:
    """Tokenise hidden code points. `single_line` also shows newlines and tabs as marks."""
    if not value:
        return Sanitized((), False)
    pieces: list[Piece] = []
    run: list[str] = []
    hidden = False

    def flush() -> None:
        if run:
            pieces.append(Piece("".join(run), "text"))
            run.clear()

    for char in value:
        if is_hidden(char):
            hidden = True
            flush()
            pieces.append(Piece(token_for(char), "token"))
        elif single_line and char == "\n":
            flush()
            pieces.append(Piece(NEWLINE_MARK, "mark"))
        elif single_line and char == "\t":
            flush()
            pieces.append(Piece(TAB_MARK, "mark"))
        else:
            run.append(char)
    flush()
    return Sanitized(tuple(pieces), hidden)


def has_hidden(values: Iterable[str | None]) -> bool:
    """True when any of `values` holds a code point `sanitize` would replace."""
    return any(v and any(is_hidden(c) for c in v) for v in values)


def visible(content: Content) -> Content:
    """The last guard of a line built from pieces (a status note, a toast): `content` as it is when
    nothing in it is hidden, else its text sanitised (the styles go: a piece was not sanitised)."""
    if not any(is_hidden(c) for c in content.plain):
        return content
    return sanitize(content.plain).content()


def elision(hidden: int) -> str:
    """The mark a shortened value ends with: an ellipsis and how many characters are hidden."""
    return f"…+{hidden}"


def elide(text: str, limit: int) -> str:
    """`text` in at most `limit` characters; when shortened it says so, with how much is hidden."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(elision(len(text))))
    return text[:keep] + elision(len(text) - keep)


def fit(text: Text, width: int, mark_style: str = "bold yellow") -> Text:
    """A one-line `Text` cut to `width` cells; a cut ends with `…+N` (N characters hidden), never silent."""
    if text.cell_len <= width:
        return text
    plain = text.plain
    keep = max(0, width - len(elision(len(plain))))
    while keep > 0 and text[:keep].cell_len + len(elision(len(plain) - keep)) > width:
        keep -= 1
    out = text[:keep]
    out.no_wrap, out.overflow = True, "crop"
    out.append(elision(len(plain) - keep), mark_style)
    return out


def safe_plain(value: str | None, limit: int | None = None, *, single_line: bool = True) -> str:
    """Sanitised, optionally shortened plain text (a cut says how much it hid; never silent)."""
    text = sanitize(value, single_line=single_line).plain
    return text if limit is None else elide(text, limit)
