"""Sessions: what this instance serves (with the env line to copy) and every other inbox.

An unserved inbox with children waiting can be adopted with one key; an inbox another live
process serves is read-only (answering it too would race that server: `docs/design/contract.md`
§ Serving from a side terminal), its evidence shown, and `T` takes it over deliberately (a heartbeat
or a temp file is its writer's claim: one file must not silence a session for good).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable, Footer, Header, Static

from core.courier.broker_health import BrokerHealth
from core.disk.paths import InvalidSessionId, env_line
from core.forwarding.liveness import SessionHeld
from core.forwarding.survey import InboxStatus
from core.serving import ServedSession, ServedSessions
from core.wiring import HistoryFailed
from tui.render.lines import env_block
from tui.render.styles import DIM, WARN
from tui.sanitize import sanitize
from tui.screens.rows_screen import RowsScreen, rows_keys

STATE_WORDS = {
    "alive": "served elsewhere",
    "stale": "unserved (stale heartbeat)",
    "dead_pid": "unserved (server died)",
    "absent": "unserved",
}


class SessionsScreen(RowsScreen):
    TABLE = "sessions-table"
    BINDINGS: ClassVar[list[BindingType]] = rows_keys(
        "sessions",
        Binding("a", "adopt", "Adopt inbox", id="sessions.adopt",
                tooltip="Serve the selected unserved inbox from this authorizer"),
        Binding("c", "copy_env", "Copy env line", id="sessions.copy",
                tooltip="Copy the env line for the selected session (OSC 52)"),
        Binding("T", "take_over", "Take over", id="sessions.take_over",
                tooltip="Answer the selected inbox here although another server seems to answer it"),
    )

    def __init__(self, served: ServedSessions, adopt: Callable[[str], ServedSession],
                 brokers: Sequence[BrokerHealth] = ()) -> None:
        """`adopt` takes a session as the node does at start (`core.wiring.take_session`); `brokers`:
        the brokers this node talks to, each one's state shown above the inboxes."""
        super().__init__(id="sessions")
        self.served = served
        self.adopt = adopt
        self.brokers = tuple(brokers)
        #: Every inbox as the core reports it: the ones served here first (`ours`), then the others.
        self.rows: list[InboxStatus] = []
        self.ours: frozenset[str] = frozenset()

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        with Vertical(id="sessions-body"):
            yield Static(id="sessions-root", markup=False)
            yield DataTable[Text](id="sessions-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="sessions-env", classes="panel", markup=False)
            yield Static(id="sessions-note", markup=False)
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.sub_title = "sessions"
        for key, label in (("session", "Session"), ("state", "State"), ("pid", "Pid"),
                           ("waiting", "Waiting"), ("note", "Note")):
            self.table.add_column(Text(label), key=key)
        self.query_one("#sessions-env", Static).border_title = "Run a headless pi so it forwards here"
        self.refresh_rows()
        self.set_interval(1.0, self.refresh_rows)

    def _header(self) -> Content:
        """The forwarding root, and each broker's state (trouble in the error style, with why)."""
        parts: list[Content | tuple[str, str]] = [("Forwarding root ", DIM),
                                                  sanitize(str(self.served.root)).content("bold")]
        for broker in self.brokers:
            state = broker.state
            parts += [("\nBroker ", DIM), sanitize(state.url, single_line=True).content("bold"), ("  ", ""),
                      (state.name, "bold $text-error" if state.trouble else "bold green")]
            if state.words:
                parts += [(": ", ""), sanitize(state.words, single_line=True).content()]
        return Content.assemble(*parts)

    def refresh_rows(self) -> None:
        self.query_one("#sessions-root", Static).update(self._header())
        selected = self._selected()
        served = self.served
        ours = served.statuses()
        self.ours = frozenset(status.session_id for status in ours)
        self.rows = rows = ours + served.others()
        table = self.table
        wanted = {row.session_id: row for row in rows}
        for key in [str(r.key.value) for r in table.ordered_rows if r.key.value not in wanted]:
            table.remove_row(key)
        present = {str(r.key.value) for r in table.ordered_rows}
        for row in rows:
            cells = self._cells(row, row.session_id in self.ours)
            if row.session_id in present:
                for column, cell in zip(("session", "state", "pid", "waiting", "note"), cells, strict=True):
                    table.update_cell(row.session_id, column, cell)
            else:
                table.add_row(*cells, key=row.session_id)
        if selected is not None and selected.session_id in wanted:
            index = table.get_row_index(selected.session_id)
            if table.cursor_row != index:
                table.move_cursor(row=index, animate=False)
        self._render_selection()

    @staticmethod
    def _cells(status: InboxStatus, ours: bool) -> tuple[Text, Text, Text, Text, Text]:
        sid = sanitize(status.session_id, single_line=True).text()
        if status.problem is not None:
            state = Text("not served: unsafe folder" if ours else "unsafe folder", style="bold red")
            note = sanitize(status.problem, single_line=True).text()
        elif ours and status.other_server is not None:
            state = Text("not answered: another server", style="bold red")
            note = Text("press T to take over", style="yellow")
        elif ours:
            state = Text("serving here", style="bold green")
            note = Text("this authorizer")
        else:
            stuck = status.stuck
            state = Text(STATE_WORDS.get(status.serving, status.serving), style="bold red" if stuck else "")
            note = Text("children waiting: press a to adopt" if stuck else
                        ("read-only" if status.serving == "alive" else ""),
                        style="yellow" if stuck else "dim")
        # Our own pid is not news ("this authorizer"); another server's is.
        pid = Text("" if ours or status.serving_pid is None else str(status.serving_pid))
        return sid, state, pid, Text(str(status.waiting)), note

    def _selected(self) -> InboxStatus | None:
        table = self.table
        if not table.row_count or not self.rows:
            return None
        key = str(table.ordered_rows[min(table.cursor_row, table.row_count - 1)].key.value)
        return next((r for r in self.rows if r.session_id == key), None)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._render_selection()

    def _render_selection(self) -> None:
        row = self._selected()
        env = self.query_one("#sessions-env", Static)
        if row is None:
            env.update(Content.styled("No session inboxes yet.", DIM))
            return
        line = env_block(row.session_id, self.served.root)
        if row.other_server is not None:
            env.update(Content.assemble(
                ("Another server seems to answer it: ", WARN),
                sanitize(row.other_server, single_line=True).content(),
                (".\nNot answered here while that lasts. T takes the inbox over: this node answers it "
                 "(and would race that server if it is real).", DIM)))
        elif row.session_id in self.ours:
            env.update(Content.assemble((line, "bold"), ("\n(c: copy it as one line)", DIM)))
        elif row.serving == "alive":
            env.update(Content.assemble(
                ("Served by another live process", WARN),
                (f" (pid {row.serving_pid})" if row.serving_pid else "", ""),
                (": read-only here; answering it too would race that server.", DIM)))
        else:
            env.update(Content.assemble(("Unserved. Press a to adopt it; then children can use:\n", DIM),
                                        (line, "")))

    def action_adopt(self) -> None:
        row = self._selected()
        note = self.query_one("#sessions-note", Static)
        if row is None:
            return
        if row.session_id in self.ours:
            note.update(Content.styled("Already served by this authorizer.", DIM))
            return
        pid = row.serving_pid
        if row.problem is not None:
            note.update(Content.assemble(("Not adopted: ", "bold $text-error"),
                                         sanitize(row.problem, single_line=True).content()))
            return
        if row.serving == "alive":
            note.update(Content.assemble(("Read-only: ", WARN), (
                f"served by live pid {pid}." if pid else "served by another live process.", "")))
            return
        sid = sanitize(row.session_id, single_line=True).content("bold")
        try:
            self.adopt(row.session_id)
        except (SessionHeld, InvalidSessionId, OSError) as exc:
            self._failed("Not adopted", Content(), exc)
            return
        except HistoryFailed as exc:
            self._failed("History failed", Content.assemble(" (serving ", sid, " anyway)"), exc)
        else:
            note.update(Content.assemble(("Now serving ", "bold"), sid))
        self.refresh_rows()

    def _failed(self, title: str, what: Content, exc: Exception) -> None:
        """The error's text (untrusted: an OS or database message may quote a path) in the status line."""
        why = sanitize(str(exc), single_line=True)
        self.query_one("#sessions-note", Static).update(
            Content.assemble((title, "bold $text-error"), what, ": ", why.content()))
        self.app.notify(why.plain, title=title, severity="error", markup=False)

    def action_take_over(self) -> None:
        """The deliberate key: answer an inbox another server seems to answer (adopted first if needed)."""
        row = self._selected()
        note = self.query_one("#sessions-note", Static)
        if row is None:
            return
        if row.other_server is None:
            note.update(Content.styled("Nothing to take over: no other server is seen answering it.", DIM))
            return
        try:
            if row.session_id not in self.ours:
                self.adopt(row.session_id)
            words = self.served.take_over(row.session_id)
        except (SessionHeld, InvalidSessionId, OSError, KeyError) as exc:
            self._failed("Not taken over", Content(), exc)
            return
        except HistoryFailed as exc:
            self._failed("History failed", Content(), exc)
            return
        note.update(Content.assemble(("Taken over ", "bold"), sanitize(row.session_id, single_line=True)
                                     .content("bold"), " from ", sanitize(words, single_line=True).content()))
        self.refresh_rows()

    def action_copy_env(self) -> None:
        row = self._selected()
        if row is not None:
            self.app.copy_to_clipboard(env_line(row.session_id, self.served.root))
            self.query_one("#sessions-note", Static).update(Content.styled("Env line copied.", DIM))
