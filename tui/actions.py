"""The one table of the keys that decide, move and open views: each action once, with its binding id,
default key(s), words, legend words and safety class.

Everything else is derived from it: the queue screen's and the app's `BINDINGS`, the legend's two
lines, the actions that decide an ask (inert while a modal is open, while typing, or while a decision
runs), the actions that need a double press, the keys a remapped decision may not take, and the map
of pi's `permissionDialogKeys` names to binding ids. The other screens' keys (steps, views) stay
with their screens: none of them is remappable and none decides from the queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from textual.binding import Binding, BindingType

#: The legend line an action is listed on: the decisions, or the batch keys (with the filter).
LegendLine = Literal["decisions", "batch"]


@dataclass(frozen=True)
class Legend:
    """How the queue's plain legend names an action: `long` when it fits, else `short`."""

    long: str
    short: str
    line: LegendLine


@dataclass(frozen=True)
class Action:
    """One action and its key(s). `action` is what Textual runs (`batch('approve')`); `id` names the
    binding (the keymap remaps by id)."""

    id: str
    action: str
    keys: str
    description: str
    tooltip: str | None = None
    key_display: str | None = None
    #: In the clickable footer; decisions never are (no mouse path decides an ask).
    footer: bool = False
    legend: Legend | None = None
    #: It decides an ask (or opens the step that does): judged by the key safety, inert while typing.
    decides: bool = False
    #: It commits on the second press of the same key when double press is on (or the ask hides characters).
    double: bool = False
    #: The sentence after "Press <key> again to" when its first press armed.
    verb: str | None = None
    #: pi's `permissionDialogKeys` name that remaps it; every other action's keys are reserved.
    dialog_key: str | None = None

    @property
    def name(self) -> str:
        """The action without its parameters (`batch`)."""
        return self.action.partition("(")[0]

    def binding(self) -> Binding:
        return Binding(self.keys, self.action, self.description, show=self.footer,
                       key_display=self.key_display, id=self.id, tooltip=self.tooltip or "")


#: The queue screen: the decisions first (in the legend's order), then batches, moves, steps.
QUEUE: tuple[Action, ...] = (
    Action("ask.approve", "approve", "y", "Approve once", "Allow this one call (approved)",
           legend=Legend("approve once", "once", "decisions"), decides=True, double=True,
           verb="approve", dialog_key="approve"),
    Action("ask.approve_session", "approve_session", "s", "Approve for subagent session",
           "approved_for_session: the child records its own suggestion for its session",
           legend=Legend("subagent session", "subagent", "decisions"), decides=True, double=True,
           verb="approve for this subagent's session", dialog_key="approveSession"),
    Action("ask.approve_session_both", "approve_session_both", "b",
           "Approve for subagent session, both directions",
           "approved_for_session at width family: read and write (only when the grant is one direction)",
           legend=Legend("both directions", "both", "decisions"), decides=True, double=True,
           verb="approve for this subagent's session in both directions", dialog_key="approveSessionBoth"),
    Action("ask.approve_serving", "approve_serving", "w", "Approve for whole serving session",
           "Record the suggestion as this node's session rule (asks for confirmation)",
           legend=Legend("whole session…", "session…", "decisions"), decides=True),
    Action("ask.deny", "deny", "n", "Deny", "Deny (denied)",
           legend=Legend("deny", "deny", "decisions"), decides=True, double=True, verb="deny",
           dialog_key="deny"),
    Action("ask.deny_reason", "deny_reason", "r", "Deny with reason",
           "Deny with a reason relayed to the agent (denied_with_reason)",
           legend=Legend("deny with reason…", "reason…", "decisions"), decides=True,
           dialog_key="denyWithReason"),
    Action("queue.mark", "mark", "space", "Mark / unmark",
           "Mark the selected ask for a batch decision and move to the next",
           legend=Legend("mark", "mark", "batch")),
    Action("queue.mark_all", "mark_all", "asterisk", "Mark all shown",
           "Mark every ask the filter shows (again: unmark them)", key_display="*",
           legend=Legend("mark all shown", "all", "batch")),
    Action("batch.approve", "batch('approve')", "Y", "Approve marked…",
           "Preview every marked ask, then approve each once on confirmation",
           legend=Legend("approve marked…", "approve…", "batch"), decides=True),
    Action("batch.deny", "batch('deny')", "N", "Deny marked…",
           "Preview every marked ask, then deny each on confirmation",
           legend=Legend("deny marked…", "deny…", "batch"), decides=True),
    Action("queue.down", "cursor(1)", "j,down", "Next", key_display="j/↓", footer=True),
    Action("queue.up", "cursor(-1)", "k,up", "Prev", key_display="k/↑", footer=True),
    Action("queue.first", "jump(0)", "home,g", "First ask"),
    Action("queue.last", "jump(-1)", "end,G", "Last ask"),
    Action("queue.filter", "filter", "slash", "Filter",
           "Show only asks matching agent: session: surface: terms and free text", key_display="/",
           legend=Legend("filter", "filter", "batch")),
    Action("queue.expand", "expand", "enter", "Expand", "Show every value in full", footer=True),
    Action("queue.scroll_down", "scroll_detail(8)", "pagedown", "Scroll detail"),
    Action("queue.scroll_up", "scroll_detail(-8)", "pageup", "Scroll detail"),
    Action("queue.disarm", "disarm", "escape", "Disarm / clear filter",
           "Cancel an armed first press, or clear the filter (never denies)"),
)

#: The app's keys, everywhere: the other views, the rule from an ask, help, quit.
APP: tuple[Action, ...] = (
    Action("app.help", "help", "question_mark", "Help", "Every key, and how the safety guards work",
           key_display="?", footer=True),
    Action("app.history", "history", "h", "History", "Every ask served: filter, details, rule suggestions",
           footer=True),
    Action("app.sessions", "sessions", "S", "Sessions",
           "Served sessions, env lines, other inboxes (adopt unserved ones)", footer=True),
    Action("app.rule_from_ask", "rule_from_ask", "R", "Rule",
           "Propose the persistent rule that would have decided the selected ask "
           "(JSON, file, diff; written only when you confirm)", footer=True),
    Action("app.grants", "grants", "W", "Grants",
           "Whole-session grants: who made them, what they decided; revoke one", footer=True),
    Action("app.judge", "judge", "J", "Judge",
           "The model judge (--judge): its agreement with you per surface, where it differed, its latency"),
    Action("app.quit", "quit", "q", "Quit",
           "Stop serving; pending asks stay in the inbox for the next authorizer", footer=True),
)


def bindings(actions: tuple[Action, ...]) -> list[BindingType]:
    return [action.binding() for action in actions]


#: The actions that decide an ask (by name: both batch keys are `batch`).
DECIDING = frozenset(action.name for action in QUEUE if action.decides)
#: The actions that need a second press (`tui.keysafety.KeyRules.double`).
DOUBLE_PRESS = frozenset(action.name for action in QUEUE if action.double)
#: The legend's lines: action → its words, in the table's order.
LEGEND: Mapping[LegendLine, tuple[tuple[str, Legend], ...]] = {
    line: tuple((a.action, a.legend) for a in QUEUE if a.legend is not None and a.legend.line == line)
    for line in ("decisions", "batch")
}
#: pi's `permissionDialogKeys` names → this app's binding ids.
DIALOG_KEYS: Mapping[str, str] = {a.dialog_key: a.id for a in QUEUE if a.dialog_key is not None}
#: Keys a remapped decision may not take: every key of an action that is not remappable, and `?` (the
#: help key as a person writes it).
RESERVED = frozenset(key for action in (*QUEUE, *APP) if action.dialog_key is None
                     for key in action.keys.split(",")) | {"?"}


#: Each deciding action's own default key, by binding id: no other decision may be remapped onto one.
DECISION_LETTERS: Mapping[str, str] = {a.id: a.keys for a in QUEUE if a.decides and len(a.keys) == 1}


def dialog_keymap(dialog_keys: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """pi's `permissionDialogKeys` as an app keymap, and the entries refused (which keep defaults).

    Like pi (#927): one printable lower-case character, not `j`/`k`, no duplicates; here also not
    a key another action of the queue or the app already uses (`RESERVED`), and never the default
    letter of another decision (issue 34 finding 3: a same-user child wrote approve=`n`, deny=`y`
    into the global config, which it can write as well as any file): a remap takes a fresh letter,
    so no letter the person knows ever does another decision. Any remap also makes every decision
    need the double press (`tui.app`).
    """
    keymap: dict[str, str] = {}
    refused: list[str] = []
    used: set[str] = set()
    for name, key in dialog_keys.items():
        binding_id = DIALOG_KEYS.get(name)
        problem = None
        if binding_id is None:
            problem = "not a remappable decision here"
        elif not isinstance(key, str) or len(key) != 1 or not key.isprintable() or key.isspace():
            problem = "must be one printable character"
        elif key in "jk" or key != key.lower():
            problem = "j, k and upper-case letters are not allowed"
        elif any(key == letter and other != binding_id for other, letter in DECISION_LETTERS.items()):
            problem = "the default key of another decision"
        elif key in used or key in RESERVED:
            problem = "already used by another key"
        if problem is not None or binding_id is None:
            refused.append(f"{name}={key!r}: {problem}")
            continue
        used.add(key)
        keymap[binding_id] = key
    return keymap, refused
