"""The main screen: pending asks oldest first, the selected one in full, decision keys.

Guards against accidental approval (`docs/contract.md` § Approval safety): the queue never reorders
under the cursor; every timing and press rule (grace after the ask is painted, double press, hidden
characters, modal grace, armed-press expiry) is `tui.keysafety.KeySafety`, fed from here: the
selection, the paint of the ask's header (`PaintProbe`), and each key's read time. `w` and `r` open
an explicit confirmation step; `esc` never decides. Decision bindings are hidden from the clickable
Footer and shown in a plain legend instead, so no mouse path decides an ask.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.binding import Binding, BindingType
from textual.content import Content

from core.serving.asks import Ask, AskKey
from tui.render.facts import (
    LINE_LIMIT,
    VALUE_LIMIT,
    ask_has_hidden,
    child_values,
)
from tui.render.styles import DIM, WARN
from tui.screens.batch_preview import BatchPreviewScreen
from tui.screens.queue_decide import DecidingQueue
from tui.screens.queue_status import STATUS_TTL_S

if TYPE_CHECKING:
    pass

def batch_exclusion(ask: Ask) -> str | None:
    """Why an ask may not be decided in a batch (it needs a look of its own), or None."""
    if ask_has_hidden(ask):
        return "it contains hidden characters"
    for value in child_values(ask):
        if len(value) > VALUE_LIMIT or value.count("\n") >= LINE_LIMIT:
            return "a value is too long to show whole in a list"
    return None


class QueueScreen(DecidingQueue):
    """Pending asks and the decision keys. Every binding has an id (see `App.set_keymap`)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "approve", "Approve once", show=False, id="ask.approve",
                tooltip="Allow this one call (approved)"),
        Binding("s", "approve_session", "Approve for subagent session", show=False,
                id="ask.approve_session",
                tooltip="approved_for_session: the child records its own suggestion for its session"),
        Binding("b", "approve_session_both", "Approve for subagent session, both directions", show=False,
                id="ask.approve_session_both",
                tooltip="approved_for_session at width family: read and write (only when the grant is "
                        "one direction)"),
        Binding("w", "approve_serving", "Approve for whole serving session", show=False,
                id="ask.approve_serving",
                tooltip="Record the suggestion as this node's session rule (asks for confirmation)"),
        Binding("n", "deny", "Deny", show=False, id="ask.deny", tooltip="Deny (denied)"),
        Binding("r", "deny_reason", "Deny with reason", show=False, id="ask.deny_reason",
                tooltip="Deny with a reason relayed to the agent (denied_with_reason)"),
        Binding("space", "mark", "Mark / unmark", show=False, id="queue.mark",
                tooltip="Mark the selected ask for a batch decision and move to the next"),
        Binding("asterisk", "mark_all", "Mark all shown", show=False, key_display="*", id="queue.mark_all",
                tooltip="Mark every ask the filter shows (again: unmark them)"),
        Binding("Y", "batch('approve')", "Approve marked…", show=False, id="batch.approve",
                tooltip="Preview every marked ask, then approve each once on confirmation"),
        Binding("N", "batch('deny')", "Deny marked…", show=False, id="batch.deny",
                tooltip="Preview every marked ask, then deny each on confirmation"),
        Binding("j,down", "cursor(1)", "Next", key_display="j/↓", id="queue.down"),
        Binding("k,up", "cursor(-1)", "Prev", key_display="k/↑", id="queue.up"),
        Binding("home,g", "jump(0)", "First ask", show=False, id="queue.first"),
        Binding("end,G", "jump(-1)", "Last ask", show=False, id="queue.last"),
        Binding("slash", "filter", "Filter", key_display="/", show=False, id="queue.filter",
                tooltip="Show only asks matching agent: session: surface: terms and free text"),
        Binding("enter", "expand", "Expand", id="queue.expand", tooltip="Show every value in full"),
        Binding("pagedown", "scroll_detail(8)", "Scroll detail", show=False, id="queue.scroll_down"),
        Binding("pageup", "scroll_detail(-8)", "Scroll detail", show=False, id="queue.scroll_up"),
        Binding("escape", "disarm", "Disarm / clear filter", show=False, id="queue.disarm",
                tooltip="Cancel an armed first press, or clear the filter (never denies)"),
    ]


    def action_mark(self) -> None:
        ask = self.current_ask()
        if ask is None:
            return
        if ask.key in self.marked:
            del self.marked[ask.key]
        else:
            self.marked[ask.key] = None
        self.table.set_marked(set(self.marked))
        self._title_table()
        self.action_cursor(1)
        self._render_legend()

    def action_mark_all(self) -> None:
        shown = self.table.ask_keys
        if shown and all(k in self.marked for k in shown):
            for key in shown:
                self.marked.pop(key, None)
        else:
            self.marked.update(dict.fromkeys(shown))
        self.table.set_marked(set(self.marked))
        self._title_table()
        self._render_legend()

    def batch_split(self) -> tuple[list[Ask], list[tuple[Ask, str]]]:
        """The marked asks still pending, in queue order: those a batch may decide, and those it may not."""
        included: list[Ask] = []
        excluded: list[tuple[Ask, str]] = []
        for ask in self.human.pending():
            if ask.key not in self.marked:
                continue
            why = batch_exclusion(ask)
            if why is None:
                included.append(ask)
            else:
                excluded.append((ask, why))
        return included, excluded

    def action_batch(self, verb: str) -> None:
        included, excluded = self.batch_split()
        if not included and not excluded:
            self.set_status(Content.styled(
                f"Nothing is marked: mark asks with {self.key_for('mark')} "
                f"(or {self.key_for('mark_all')} for every ask shown), then press "
                f"{self.key_for(f'batch({verb!r})')} again.", WARN))
            return
        if not included:  # no batch runs: they are unmarked, not left to be carried by the next one
            self._unmark(excluded)
            self._look_alone(excluded, "No batch: every marked ask needs a look of its own (unmarked). ")
            return
        if not self._allowed("batch"):  # the preview is a step: one press, after the paint and grace
            return

        preview = BatchPreviewScreen(verb, included, excluded, self.safety, self.key_time,
                                     double_press=self.settings.double_press)

        async def done(confirmed: bool | None) -> None:
            if confirmed:
                await self._decide_batch(verb, [a.key for a in included], excluded, preview.reason)
            else:
                self.set_status(Content.styled("Batch cancelled: nothing was decided.", DIM))

        self.push_modal(preview, done)

    async def _decide_batch(self, verb: str, keys: list[AskKey], excluded: list[tuple[Ask, str]],
                            reason: str | None) -> None:
        """Each listed ask still pending is decided through the same call as a single decision
        (a denial with the batch's reason, as `r` would with the same text)."""

        async def deny(key: AskKey) -> object:
            return await self.human.deny(key, reason)

        call = self.human.approve_once if verb == "approve" else deny
        decided = skipped = failed = 0
        for key in keys:
            if self.human.get(key) is None:
                skipped += 1  # answered or withdrawn since the preview: never decided twice
                continue
            if await self._commit(call, key):
                decided += 1
            else:
                failed += 1
        words = "Approved once" if verb == "approve" else "Denied"
        parts: list[tuple[str, str]] = [(f"{words}: {decided} ask{'s' if decided != 1 else ''}", "bold")]
        parts.append((" (each recorded on its own)", DIM))
        if skipped:
            parts.append((f"; {skipped} already gone (withdrawn or answered)", WARN))
        if failed:
            parts.append((f"; {failed} not decided", "bold $text-error"))
        self.say_after_events(Content.assemble(*parts), ttl=STATUS_TTL_S)
        if excluded:
            self._unmark(excluded)
            self.app.call_later(self._look_alone, excluded)

    def _unmark(self, excluded: list[tuple[Ask, str]]) -> None:
        """Left out of a batch, they are unmarked too: the person decides each alone, and a later batch
        starts from what is marked again, not from what this one could not take."""
        for ask, _ in excluded:
            self.marked.pop(ask.key, None)
        self.table.set_marked(set(self.marked))
        self._title_table()
        self._render_legend()

    def _look_alone(self, excluded: list[tuple[Ask, str]], lead: str = "") -> None:
        """Asks a batch may not decide: select the first, so the person looks at it alone."""
        ask, why = excluded[0]
        if ask.key in self.table.ask_keys and ask.key != self.selected:
            self.table.move_cursor(row=self.table.ask_keys.index(ask.key), animate=False, scroll=True)
            self._select(ask.key)
        others = f" (and {len(excluded) - 1} more)" if len(excluded) > 1 else ""
        self.set_status(Content.assemble((f"{lead}Decide this ask alone: ", WARN), (why, ""), (others, DIM)),
                        about=ask.key)
