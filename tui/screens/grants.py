"""Grants: this node's whole-serving-session grants, who made them, what they decided; revoke one.

A grant made with `w` keeps approving matching asks until the session ends. This screen lists
every live grant (pattern, surface, agent scope, when, by whom while answering which agent, how
many asks it decided) and revokes the selected one on a second press of the revoke key; the next
ask is judged without it. Revoking only ever narrows what is allowed, so it needs no grace window.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable, Footer, Header, Static

from core.judging.grant_log import GrantEntry
from core.judging.recorded import RecordedAuthority
from core.rules.matcher import acts_as
from tui.render.styles import DIM, WARN
from tui.sanitize import sanitize
from tui.screens.rows_screen import RowsScreen, rows_keys

COLUMNS = ("Surface", "Pattern", "Decided", "Made by", "At", "Agent scope", "Session")
REFRESH_S = 1.0


def grant_cells(entry: GrantEntry) -> tuple[Text, ...]:
    """One row, every child-sent string literal and sanitised (Text cells: never markup)."""
    made = time.strftime("%H:%M:%S", time.localtime(entry.made_at))
    by = sanitize(f"{entry.made_by} (answering {entry.asked_by})", single_line=True).text()
    pattern = sanitize(entry.pattern, single_line=True).text("bold")
    acting = acts_as(entry.pattern, entry.surface, str(Path.home()))
    if acting is not None:  # as written, and as it acts (issue 20 finding 6)
        pattern.append(" ⚠ acts as ", style="bold yellow")
        pattern.append_text(sanitize(acting, single_line=True).text("bold"))
    return (
        sanitize(entry.surface, single_line=True).text("bold"),
        pattern,
        Text(f"{entry.decided} ask{'s' if entry.decided != 1 else ''}"),
        by,
        Text(made),
        Text(entry.agent_scope),
        sanitize(entry.session_id, single_line=True).text(),
    )


class GrantsScreen(RowsScreen):
    """Every binding has an id; the help screen lists them."""

    TABLE = "grants-table"
    BINDINGS: ClassVar[list[BindingType]] = rows_keys(
        "grants",
        Binding("x,delete", "revoke", "Revoke (press twice)", id="grants.revoke",
                tooltip="Revoke the selected grant: the next ask is judged without it"),
    )

    def __init__(self, authority: RecordedAuthority) -> None:
        super().__init__(id="grants-screen")
        self.authority = authority
        self.entries: list[GrantEntry] = []
        self.armed: tuple[str, str] | None = None
        #: The status line answers a key (armed, revoked): the periodic refresh leaves it alone.
        self.noted = False

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        with Vertical(id="grants-body"):
            yield Static(id="grants-intro", markup=False)
            yield DataTable[Text](id="grants-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="grants-status", markup=False)
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.sub_title = "whole-session grants"
        self.query_one("#grants-intro", Static).update(Content.styled(
            "Grants made with w (approve for the whole serving session). Each approves matching asks "
            "until the session ends, or until you revoke it here.", DIM))
        table = self.table
        for label in COLUMNS:
            table.add_column(label, key=label)
        self.refresh_grants()
        self.set_interval(REFRESH_S, self.refresh_grants)
        table.focus()

    def selected(self) -> GrantEntry | None:
        if not self.entries:
            return None
        return self.entries[min(self.table.cursor_row, len(self.entries) - 1)]

    def refresh_grants(self) -> None:
        """Rebuild the rows (a handful), keeping the cursor on the same grant when it still exists."""
        before = self.selected()
        self.entries = self.authority.list_grants()
        table = self.table
        table.clear()
        for entry in self.entries:
            table.add_row(*grant_cells(entry), key=f"{entry.session_id}\x00{entry.grant_id}")
        if not self.entries:
            if self.armed is None and not before and not self.noted:
                self._status(Content.styled(
                    "No whole-session grants: every ask is judged by the rules or you.", DIM), noted=False)
            return
        keys = [(e.session_id, e.grant_id) for e in self.entries]
        if before is not None and (before.session_id, before.grant_id) in keys:
            table.move_cursor(row=keys.index((before.session_id, before.grant_id)), animate=False)

    def action_cursor(self, delta: int) -> None:
        self.armed = None
        super().action_cursor(delta)

    def action_revoke(self) -> None:
        entry = self.selected()
        if entry is None:
            return
        target = (entry.session_id, entry.grant_id)
        if self.armed != target:
            self.armed = target
            key = self.app.get_key_display(Binding("x", "revoke"))
            self._status(Content.assemble(
                (f"Press {key} again to revoke ", WARN), sanitize(entry.surface).content("bold"), (" ", ""),
                sanitize(entry.pattern).content("bold"), (".", WARN)))
            return
        self.armed = None
        revoked = self.authority.revoke_grant(*target)
        self.refresh_grants()
        if revoked:
            self._status(Content.assemble(("Revoked: ", "bold"), sanitize(entry.surface).content(), (" ", ""),
                                          sanitize(entry.pattern).content("bold"),
                                          (" — the next matching ask is judged without it.", DIM)))
        else:
            self._status(Content.styled("That grant was already gone.", DIM))

    def _status(self, content: Content, *, noted: bool = True) -> None:
        self.noted = noted
        self.query_one("#grants-status", Static).update(content)
