"""The queue table's columns as data: a key, a label (a short one when narrow), a width and how to
make its cell from an ask. Adding a column is one entry in `COLUMNS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text

from core.vocabulary.asks import Ask, AskKey
from tui.render.ask_facts import ask_risk, broker_origin, primary_surface, primary_value, risk_label
from tui.sanitize import fit, sanitize

CUT_STYLE = "bold yellow"


def _agent(ask: Ask) -> Text:
    return sanitize(ask.request.requester_agent_name, single_line=True).text()


def _surface(ask: Ask) -> Text:
    return sanitize(primary_surface(ask), single_line=True).text()


def _host_and_session(ask: Ask) -> tuple[Text, Text] | None:
    """A broker ask's courier host (bold: what tells remote asks apart) and session, sanitised."""
    origin = broker_origin(ask)
    if origin is None:
        return None
    return (sanitize(origin.host, single_line=True).text("bold"),
            sanitize(origin.session_id, single_line=True).text("dim"))


def _session(ask: Ask) -> Text:
    """The served session; a broker ask's reads `host/session`, host first (`nats:` says nothing
    the host does not)."""
    remote = _host_and_session(ask)
    if remote is None:
        return sanitize(ask.key.session_id, single_line=True).text("dim")
    host, session = remote
    return Text.assemble(host, ("/", "dim"), session)


def _session_fitted(ask: Ask, width: int) -> Text:
    """The session cell in `width` cells. A broker ask's is cut in its session first, so its host
    stays whole as long as it fits: `host/ses…+N`, or `host/…` in a narrow column (the detail shows
    the rest); a host longer than the column keeps as much of itself as fits, ending with `…`."""
    whole = _session(ask)
    remote = _host_and_session(ask)
    if remote is None or whole.cell_len <= width:
        return fit(whole, width, CUT_STYLE)
    host, session = remote
    room = width - host.cell_len - 1  # after `host/`
    if room >= 1 + len(f"…+{session.cell_len}"):
        return Text.assemble(host, ("/", "dim"), fit(session, room, CUT_STYLE))
    if room >= 1:
        return Text.assemble(host, ("/", "dim"), ("…", CUT_STYLE))
    return Text.assemble(host[:max(0, width - 1)], ("…", CUT_STYLE))


def _risk(ask: Ask) -> Text:
    """A hint from the facts (never a decision): empty when none applies."""
    return Text(risk_label(ask_risk(ask)), style="bold yellow", no_wrap=True)


def _value(ask: Ask) -> Text:
    return sanitize(primary_value(ask), single_line=True).text("" if ask.has_facts else "italic")


@dataclass(frozen=True)
class Column:
    """One table column. `width=None`: takes what the fixed columns leave (at most one such column);
    `narrow`: its width in a narrow table (under `NARROW` cells), to leave the value more room, and
    `short` its label there. A header is never cut: a column is at least as wide as its label."""

    key: str
    label: str
    width: int | None
    cell: Callable[[Ask], Text] | None = None  # None: the screen fills it (marks, times)
    #: Its cell cut to a width, when a plain cut at the end would hide what matters (a broker ask's
    #: host); None: `cell` cut by `tui.sanitize.fit`.
    fitted: Callable[[Ask, int], Text] | None = None
    optional: bool = False
    narrow: int | None = None
    short: str | None = None
    #: How wide it may grow when the value already has `VALUE_ROOM` cells (wide terminals).
    grow: int | None = None

    def label_for(self, narrow: bool) -> str:
        return self.short if narrow and self.short is not None else self.label


COLUMNS: tuple[Column, ...] = (
    Column("mark", "", 2),  # ▶ on the selected row, ● on a marked one
    Column("age", "Age", 6, narrow=5),
    Column("left", "Left", 7, narrow=5),
    Column("session", "Session", 12, _session, _session_fitted, optional=True, narrow=8, grow=40),
    Column("agent", "Agent", 16, _agent, narrow=10, grow=24),
    Column("surface", "Surface", 14, _surface, narrow=10, grow=24),  # external_directory_read: 23
    Column("risk", "Risk (hint)", 18, _risk, narrow=8, short="Hint", grow=24),
    Column("value", "Value", None, _value),
)
#: Cells the value keeps before the other columns grow into a wide table.
VALUE_ROOM = 60


def row_key_of(key: AskKey) -> str:
    return f"{key.session_id}\x00{key.name}"


def order_of(ask: Ask) -> tuple[float, float]:
    """Display order: the child's `createdAt`, then arrival (asks adopted from another inbox interleave)."""
    return (ask.request.created_at, ask.arrived_at)
