"""`AuthorizerApp`: the person at the arbiter of a running `ServingCore`.

The app is handed a built node (`core.wiring.AttendedNode`: the `ServingCore`, the
`Person` it escalates to, its recorded authority and history, each by name), runs
`core.run()` as a worker in its own event loop, and stops it on quit (heartbeats removed; pending
requests stay in their inbox for the next authorizer). All decisions go through `Person`,
on the queue screen (`tui.screens.queue`).

One class, holding its parts: `CoreEvents` (the core's events as Messages, `tui.core_events`),
`Attention` (one toast, bell and OSC per burst of arrivals, `tui.attention`) and `Quitting` (quit,
SIGHUP/SIGTERM, the forced exit, `tui.quitting`). Read top to bottom: construction, key times,
lifecycle, the core's events, the other views (history, grants, sessions, help, the rule from an
ask, config reviews; screens not shown at start are imported when first opened, so the first frame
waits for nothing it does not show), the command palette, notices.

What a test or the screenshots vary comes in through one value, `AppSeams`.

Size: one class, the app; its parts that stand alone are modules already (`CoreEvents`, `Attention`,
`Quitting`, the screens); what is left (wiring the views, the palette, where a notice goes) reads
best in one place.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events
from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.notifications import Notification, Notify, SeverityLevel
from textual.screen import Screen

from core.clock import SYSTEM_CLOCK, KeyClock
from core.courier.broker_health import BrokerState
from core.judging.judge_breaker import BreakerState
from core.judging.model_judge import JudgeReview
from core.person import AskAdded, AskDecided, AskWithdrawn, Person, PersonEvent
from core.vocabulary.asks import Ask, AskKey
from core.wiring import AttendedNode
from tui.actions import APP, DECIDING, bindings, dialog_keymap
from tui.attention import Attention
from tui.core_events import (
    CoreEvents,
    Notice,
    PersonChanged,
    ServingChanged,
    another_server,
    person_entry,
    serving_entry,
    serving_notice,
    withdrawn_notice,
)
from tui.keysafety import KeyRules, KeySafety
from tui.quitting import FORCED_RELEASE_WAIT_S, Quitting
from tui.render.ask_facts import ask_label
from tui.render.lines import serving_content
from tui.render.styles import DIM, WARN
from tui.sanitize import safe_plain
from tui.screens.ask_steps import AskModal, ExpandScreen, ReasonScreen
from tui.screens.batch_preview import BatchPreviewScreen
from tui.screens.grant_steps import GrantConfirmScreen, GrantNoFactsScreen, GrantRefusedScreen
from tui.screens.queue import QueueScreen
from tui.screens.quit import QuitConfirmScreen
from tui.screens.run_history import HistoryEntry, HistoryScreen
from tui.ui_settings import UiSettings

if TYPE_CHECKING:
    from core.rules.reloads import PendingReload
    from tui.screens.review_steps import RuleReach

ARM_EXPIRY_S = 5.0
#: Toasts standing at once (top right, above the asks table; never over the keys or the ask).
MAX_TOASTS = 3
NO_RULE_ID = "app.rule_from_ask.without_facts"
#: A toast over the queue: one line this long at most (the Toast is 56 wide, with its edge and padding).
QUEUE_TOAST_CELLS = 52


def queue_toast(message: str, title: str) -> str:
    """A notice as one line of at most `QUEUE_TOAST_CELLS` cells (`title: first line (+N more)`)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
    text = (f"{title}: " if title else "") + (lines[0] if lines else "")
    room = QUEUE_TOAST_CELLS - len(more)
    if Content(text).cell_length > room:
        text = Content(text).truncate(room - 1).plain + "…"
    return text + more


@dataclass(frozen=True)
class AppSeams:
    """What a test or the screenshots vary, passed once: the wall clock of ages (`wall`), the monotonic
    clock of key safety with each key's read time (`keys`), where the bell and OSC signals are written
    (`terminal`; None: the terminal), and who is told of each toast shown (`toasts`)."""

    wall: Callable[[], float] = SYSTEM_CLOCK.wall
    keys: KeyClock = SYSTEM_CLOCK
    terminal: Callable[[str], None] | None = None
    toasts: Callable[[Notification], None] | None = None


class AuthorizerApp(App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute, so subclasses elsewhere find it
    TITLE = "pi-authorizer"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: every action of the screen, by name (none decides an ask)

    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings(APP),
        # `R` on an ask without facts: not offered (`check_action`), but a press says why.
        Binding("R", "no_rule_from_ask", show=False, id=NO_RULE_ID),
    ]

    def __init__(self, node: AttendedNode, settings: UiSettings | None = None,
                 seams: AppSeams | None = None) -> None:
        super().__init__()
        seams = seams or AppSeams()
        self.node = node
        self.core = core = node.core
        self.person = person = node.person
        self.store = node.history
        self.authority = node.authority
        self.rules = self.authority.store if self.authority is not None else None
        self.settings = settings or UiSettings()
        self.seams = seams
        self.clock = seams.wall
        self.key_clock = seams.keys
        self._key_at: float | None = None
        #: This run's decisions and the core's own answers and problems (the history view without a ledger).
        self.history: list[HistoryEntry] = []
        keymap, self.refused_keys = dialog_keymap(self.settings.dialog_keys)
        self.safety = KeySafety(self.key_clock.monotonic, KeyRules(
            grace_s=max(0, self.settings.input_grace_ms) / 1000,
            # Keys remapped by a file (every one is writable by a same-user child) always need the
            # double press (issue 34 finding 3).
            double_press=self.settings.double_press or bool(keymap),
            arm_expiry_s=ARM_EXPIRY_S,
        ))
        self.model_judge = node.model_judge
        self.queue = QueueScreen(person, self.settings, self.clock, self.safety, self.key_time,
                                 sessions_served=lambda: len(core.served),
                                 serving=self._serving, advice=self._advice)
        self.core_events = CoreEvents(person, core, self.post_message)
        self.attention = Attention(self, person, self.settings, seams.terminal or self.write_to_terminal,
                                   tmux=bool(os.environ.get("TMUX")))
        self.quitting = Quitting(self, core)
        # A signal's exit ends the process from inside the app: the history's queue is kept there too.
        self.quitting.forced_exit_cleanups.append(partial(node.close, FORCED_RELEASE_WAIT_S))
        self._shown: set[AskKey] = set()
        self._keymap_ids: dict[str, str] = {}
        if keymap:
            self.set_keymap(keymap)

    def _advice(self, ask: Ask) -> JudgeReview | None:
        """The model judge's review of this very ask (None without a judge, or before it answered)."""
        return None if self.model_judge is None else self.model_judge.advice.get(ask.parsed)

    def _judge_changed(self, state: BreakerState, why: str | None) -> None:
        """The header says while the judge is unavailable (the log says it too, once per change)."""
        if state == "unavailable":
            if not self.sub_title.startswith("NOT SERVING"):
                self.sub_title = "judge unavailable: asks come straight to you"
            self.notify(f"The model judge is unavailable ({safe_plain(why or '?', 200)}): asks come straight "
                        "to you until a probe succeeds.", title="Judge unavailable", severity="warning",
                        markup=False, timeout=10)
        else:
            if self.sub_title.startswith("judge unavailable"):
                self.sub_title = ""
            self.notify("The model judge answers again.", title="Judge available", markup=False)

    def _serving(self) -> Content:
        """What the empty queue says: the sessions served, the root, the env line a child needs."""
        served = self.core.served
        return serving_content([status.session_id for status in served.statuses()], self.core.root)

    # -- key times (for key safety) ---------------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        """Bindings run inside this call: while they do, `key_time()` is when their key was read."""
        if not isinstance(event, events.Key):
            await super().on_event(event)
            return
        outer, self._key_at = self._key_at, self.key_clock.key_time(event.time)
        try:
            await super().on_event(event)
        finally:
            self._key_at = outer

    def key_time(self) -> float:
        """When the key being handled was read (now, outside a key)."""
        return self.key_clock.monotonic() if self._key_at is None else self._key_at

    # -- lifecycle -------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.core_events.listen()
        self.push_screen(self.queue)
        if self.authority is not None:
            self.authority.on_pending.append(self._pending_reload)
            for pending in self.authority.store.pending():
                self.call_later(self._review_reload, pending)
        self.quitting.core_worker = self.run_worker(self._serve(), name="serving-core", exit_on_error=False)
        if self.model_judge is not None:
            self.model_judge.model.breaker.listeners.append(self._judge_changed)
        if not self.is_headless:
            self.quitting.install_signal_handlers()
        for broker in self.node.brokers:
            broker.subscribe(self._broker_state)
        if self.node.courier is not None:
            target = self.node.courier.courier.target
            self.tell(Notice(f"Asks this node's rules leave undecided are carried to {target}; you decide "
                             "here only those it cannot (not served, or no answer in time).",
                             title="Carrying asks", timeout=15))
        if self.settings.ignored_knobs:
            ignored = safe_plain(", ".join(self.settings.ignored_knobs), 400)
            self.notify(f"Ignored (a config children can write may not set the person's keys, their "
                        f"safety, yolo or the child's timeout; defaults kept): {ignored}",
                        title="A child-writable config tried to set your knobs",
                        # An error: it is toasted at every size (a status-line note at 80x24 would
                        # be replaced by the first arrival before anyone read it).
                        severity="error", markup=False, timeout=15)
        if self.refused_keys:
            refused = safe_plain("; ".join(self.refused_keys), 400)
            source = safe_plain(self.settings.dialog_keys_from, 200) or "the config"
            self.notify(f"Ignored permissionDialogKeys entries from {source} (defaults kept): {refused}",
                        title="Decision keys refused", severity="error", markup=False, timeout=15)

    def _broker_state(self, state: BrokerState) -> None:
        """A broker's state changed (`core/courier/broker_health.py`): the header says trouble while it
        lasts (never over a NOT SERVING), and a toast says each change."""
        if state.name == "connecting":
            return
        if state.trouble:
            if not self.sub_title.startswith("NOT SERVING"):
                self.sub_title = f"BROKER {state.name.upper()}"
            self.notify(safe_plain(state.words, 400), title=f"Broker: {state.name}", severity="error",
                        markup=False, timeout=30)
        elif self.sub_title.startswith("BROKER "):
            self.sub_title = ""
            self.notify(f"{safe_plain(state.url, 200)} connected.", title="Broker", markup=False)

    async def _serve(self) -> None:
        try:
            await self.core.run()
        except Exception as exc:
            self.sub_title = "NOT SERVING"
            self.notify(f"The serving core stopped: {safe_plain(str(exc), 400)}", title="Not serving",
                        severity="error", markup=False, timeout=60)
            raise
        if not self.quitting.stopping:
            self.sub_title = "NOT SERVING"
            self.notify("The serving core stopped.", severity="error", markup=False, timeout=60)

    async def action_quit(self) -> None:
        pending = self.person.count()
        if pending:
            async def answered(confirmed: bool | None) -> None:
                if confirmed:
                    await self.quitting.quit_now()

            await self.push_screen(QuitConfirmScreen(pending), answered)
            return
        await self.quitting.quit_now()

    def write_to_terminal(self, sequence: str) -> None:
        """Write a bell / OSC notification to the terminal (nothing when headless)."""
        driver = self._driver
        if driver is not None and not self.is_headless:
            driver.write(sequence)
            driver.flush()

    # -- the core's events (`tui.core_events`), in the order posted ---------------------------------

    def on_person_changed(self, message: PersonChanged) -> None:
        events = self.core_events.take(message)
        for event in events:
            self._person_event(event)
        self.queue.handle_events(events)
        for event in events:
            if isinstance(event, AskAdded):
                self.attention.arrived(event.ask)

    def _person_event(self, event: PersonEvent) -> None:
        entry = person_entry(event, self.clock())
        if entry is not None:
            self.history.append(entry)
        if isinstance(event, AskWithdrawn):
            self.tell(withdrawn_notice(event))
            self._abandon_modals(event.ask)
        if isinstance(event, AskWithdrawn | AskAdded):
            self._batch_changed(event)
        if isinstance(event, AskDecided) and event.batch and self.store is not None:
            self.store.mark_batch(event.ask.key, event.ask.parsed.raw, event.batch)

    def _abandon_modals(self, ask: Ask) -> None:
        screen = self.screen
        if isinstance(screen, AskModal) and screen.ask_key == ask.key:
            if isinstance(screen, GrantConfirmScreen):
                screen.dismiss(False)
            else:
                screen.dismiss(None)

    def _batch_changed(self, event: AskWithdrawn | AskAdded) -> None:
        """An open batch preview listing an ask withdrawn, or replaced under its id, is cancelled."""
        for screen in self.screen_stack:
            if not isinstance(screen, BatchPreviewScreen):
                continue
            for shown in screen.included:
                if shown.key != event.ask.key or (shown is event.ask and isinstance(event, AskAdded)):
                    continue
                what = "withdrawn by its child" if isinstance(event, AskWithdrawn) else \
                    "replaced by another ask under the same id"
                screen.ask_changed(f"{ask_label(shown)} was {what} after this preview was shown")

    def on_serving_changed(self, message: ServingChanged) -> None:
        now = self.clock()
        for event in self.core_events.take(message):
            entry = serving_entry(event, now)
            if entry is not None:
                self.history.append(entry)
            if event.kind == "not_serving":
                why = ": another server answers it" if another_server(event) else ""
                self.sub_title = f"NOT SERVING {safe_plain(event.key.session_id, 40)}{why}"
            elif event.kind == "serving_again" and self.sub_title.startswith("NOT SERVING "):
                self.sub_title = ""
            notice = serving_notice(event)
            if notice is not None:
                self.tell(notice)

    def on_queue_screen_ask_shown(self, message: QueueScreen.AskShown) -> None:
        """The history records when an ask was first on screen."""
        if self.store is not None and message.key not in self._shown:
            self._shown.add(message.key)
            self.store.mark_shown(message.key)

    # -- the other views ----------------------------------------------------------------------------

    def set_keymap(self, keymap: dict[str, str]) -> None:  # type: ignore[override]
        self._keymap_ids = dict(keymap)
        super().set_keymap(keymap)

    def update_keymap(self, keymap: dict[str, str]) -> None:  # type: ignore[override]
        self._keymap_ids.update(keymap)
        super().update_keymap(keymap)

    def keys_of(self, binding: Binding) -> str:
        keys = self._keymap_ids.get(binding.id or "", binding.key)
        shown = [binding.key_display] if binding.key_display and binding.id not in self._keymap_ids else [
            self.get_key_display(Binding(k.strip(), binding.action)) for k in keys.split(",")]
        return "/".join(shown)

    def _show(self, make: Callable[[], Screen[None]], kind: type[Screen[None]]) -> None:
        toggling = isinstance(self.screen, kind)
        while len(self.screen_stack) > 1 and self.screen is not self.queue:
            self.pop_screen()
            break
        if not toggling:
            self.push_screen(make())

    def action_history(self) -> None:
        """The durable history when this app records one, else this run's decisions."""
        if self.store is not None:
            from tui.screens.review import ReviewScreen

            store, rules, reach = self.store, self.rules, self.rule_reach()
            self._show(lambda: ReviewScreen(store, rules, reach), ReviewScreen)
        else:
            self._show(lambda: HistoryScreen(self.history), HistoryScreen)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("rule_from_ask", "no_rule_from_ask"):  # it reads the queue's selected ask
            ask = self.queue.shown_ask() if self.screen is self.queue else None
            if action == "no_rule_from_ask":
                return ask is not None and not ask.has_facts
            return self.screen is self.queue and (ask is None or ask.has_facts)  # never offered without facts
        return True

    def action_no_rule_from_ask(self) -> None:
        self.notify("This ask has no child-fixed facts (a 20.7.3 child): no rule can match it, so R "
                    "proposes none. Decide it here: y, s (with the child's suggestion), n or r.",
                    title="No rule proposed", severity="warning", markup=False)

    def action_rule_from_ask(self) -> None:
        ask = self.queue.shown_ask()  # the very ask on screen, never another under its name
        if ask is None or self.rules is None:
            self.notify("No ask selected, or this authorizer has no rules to add to.", markup=False)
            return
        from core.history.suggest import SuggestionRefused, suggestion_from_ask
        from tui.screens.review_steps import ConfirmRuleScreen

        intent = ask.parsed.access_intent
        try:
            offer = suggestion_from_ask(
                self.rules,
                intent.surface if intent else None,
                intent.match_values if intent else (),
                [(g.surface, g.pattern) for g in Person.serving_grants_of(ask)],
                intent.principal.agent_name if intent else ask.request.requester_agent_name,
                self.clock(),
            )
        except SuggestionRefused as exc:
            self.notify(safe_plain(str(exc), 300), title="No rule proposed", severity="warning", markup=False)
            return
        self.queue.push_modal(ConfirmRuleScreen(offer, self.rules, self.safety, self.key_time,
                                                self.rule_reach()))

    def rule_reach(self) -> RuleReach:
        """A written rule's reach: the pending asks it decides, listed, then decided exactly."""
        from tui.screens.review_steps import RuleReach

        return RuleReach(self.person.rule_reach, self.queue.decide_by_written_rule)

    def action_grants(self) -> None:
        from tui.screens.grants import GrantsScreen

        authority = self.authority
        if authority is None:
            self.notify("This authorizer records no whole-session grants.", markup=False)
            return
        self._show(lambda: GrantsScreen(authority), GrantsScreen)

    def action_judge(self) -> None:
        from tui.screens.judge_view import JudgeScreen

        judge = self.model_judge
        if judge is None or judge.record_path is None:
            self.notify("No model judge records here (start with --judge, and a history).", markup=False)
            return
        record, history = judge.record_path, self.store.path if self.store is not None else None
        self._show(lambda: JudgeScreen(record, history, self.rules), JudgeScreen)

    def action_sessions(self) -> None:
        from tui.screens.sessions import SessionsScreen

        self._show(lambda: SessionsScreen(self.core.served, self.node.take_session, self.node.brokers),
                   SessionsScreen)

    def help_groups(self) -> list[tuple[str, Sequence[BindingType]]]:
        """Every screen's bindings, as the help screen lists them (the history view this app uses)."""
        from tui.screens.grants import GrantsScreen
        from tui.screens.reload import ReloadReviewScreen
        from tui.screens.review import ReviewScreen
        from tui.screens.review_steps import ConfirmRuleScreen, DetailScreen, SuggestionsScreen
        from tui.screens.sessions import SessionsScreen
        from tui.widgets.history_list import HistoryList

        history: list[tuple[str, Sequence[BindingType]]] = (
            [("History view (h)", [*ReviewScreen.BINDINGS, *HistoryList.BINDINGS]),
             ("One past ask", DetailScreen.BINDINGS),
             ("Suggested rules", SuggestionsScreen.BINDINGS),
             ("Writing a suggested rule", ConfirmRuleScreen.BINDINGS)]
            if self.store is not None else [("History view (h)", HistoryScreen.BINDINGS)]
        )
        return [
            ("Deciding the selected ask", QueueScreen.BINDINGS),
            ("Everywhere", [*(b for b in self.BINDINGS if not isinstance(b, Binding) or b.id != NO_RULE_ID),
                            Binding(self.COMMAND_PALETTE_BINDING, "command_palette",
                                                    "Every action by name", id="app.palette")]),
            ("Batch preview", BatchPreviewScreen.BINDINGS),
            ("Whole-session confirmation", GrantConfirmScreen.BINDINGS),
            ("Whole-session refusal", GrantRefusedScreen.BINDINGS),
            ("Whole-session grant on an ask without facts", GrantNoFactsScreen.BINDINGS),
            ("Config change review", ReloadReviewScreen.BINDINGS),
            ("Reason editor (keys type into the field; none decides)", ReasonScreen.BINDINGS),
            ("Expanded ask", ExpandScreen.BINDINGS),
            ("Quit confirmation", QuitConfirmScreen.BINDINGS),
            ("Sessions view (S)", SessionsScreen.BINDINGS),
            ("Grants view (W)", GrantsScreen.BINDINGS),
            *history,
            *self._judge_help(),
        ]

    def _judge_help(self) -> list[tuple[str, Sequence[BindingType]]]:
        """The judge view's keys, when this app has a model judge."""
        if self.model_judge is None:
            return []
        from tui.screens.judge_view import JudgeScreen

        return [("Judge view (J)", JudgeScreen.BINDINGS)]

    def action_help(self) -> None:
        """Help opens at the keys of the screen it was asked on, then the keys that work everywhere."""
        from tui.screens.help import HelpScreen

        sections: list[tuple[str, list[tuple[str, Binding]]]] = []
        for title, group in self.help_groups():
            rows = [(self.keys_of(b), b) for b in group if isinstance(b, Binding)]
            sections.append((title, rows))
        here = self._help_title(self.screen)
        first = [(f"On this screen: {t}", rows) for t, rows in sections if t == here]
        everywhere = [(t, rows) for t, rows in sections if t == "Everywhere" and t != here]
        rest = [(t, rows) for t, rows in sections if t not in (here, "Everywhere")]
        self.push_screen(HelpScreen([*first, *everywhere, *rest]))

    def _help_title(self, screen: Screen[Any]) -> str:
        """The help section of `screen`'s own keys (the queue's when it has none of its own)."""
        titles = {"QueueScreen": "Deciding the selected ask", "ReviewScreen": "History view (h)",
                  "HistoryScreen": "History view (h)", "GrantsScreen": "Grants view (W)",
                  "SessionsScreen": "Sessions view (S)", "DetailScreen": "One past ask",
                  "SuggestionsScreen": "Suggested rules", "ConfirmRuleScreen": "Writing a suggested rule",
                  "ReloadReviewScreen": "Config change review", "JudgeScreen": "Judge view (J)"}
        return titles.get(type(screen).__name__, "Deciding the selected ask")

    def _pending_reload(self, pending: PendingReload) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a worker thread (a grant check read a new agent file): to the app's loop
            self.call_from_thread(self._review_reload, pending)
            return
        self.call_later(self._review_reload, pending)

    def _review_reload(self, pending: PendingReload) -> None:
        from tui.screens.reload import ReloadReviewScreen

        authority = self.authority
        if authority is None or pending not in authority.store.pending():
            return  # superseded by a newer change, which has its own review

        def decided(accept: bool | None) -> None:
            if not accept:
                authority.decline(pending)
                path = safe_plain(str(pending.path))
                self.notify(f"Config change NOT applied; the rules in force stay: {path}",
                            severity="warning", markup=False)
            elif authority.accept(pending):
                self.notify(f"Config change applied: {safe_plain(str(pending.path))}", markup=False)
            else:
                self.notify("That config change was superseded by a newer one (reviewed next).",
                            severity="warning", markup=False)

        self.push_screen(ReloadReviewScreen(pending, self.settings.input_grace_ms), decided)

    # -- the command palette ------------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette: every action of the screen it was opened on, with its key.

        Choosing a decision only says which key takes it: no palette entry (and so no click)
        decides an ask."""
        seen: set[str] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if binding.action in seen or binding.action == "command_palette" or not binding.description:
                continue
            seen.add(binding.action)
            keys = self.keys_of(binding)
            title = f"{binding.description} ({keys})"
            name = binding.action.partition("(")[0]
            if isinstance(active.node, QueueScreen) and name in DECIDING:
                yield SystemCommand(title, "A decision: press its key on the ask (the palette never decides)",
                                    partial(self._say_key, binding.description, keys))
            else:
                yield SystemCommand(title, binding.tooltip or binding.description,
                                    partial(self.run_action, binding.action, active.node))

    def _say_key(self, description: str, keys: str) -> None:
        self.notify(f"{description}: press {keys} with the ask on screen.", markup=False)

    # -- notices ---------------------------------------------------------------------------------

    def _on_notify(self, event: Notify) -> None:
        """Toasts are few: the same one shown again replaces itself, and the oldest go so that at
        most `MAX_TOASTS` stand (a burst of answers never piles up over the asks); over the queue, one."""
        new = event.notification
        shown = [n for n in self._notifications if not n.has_expired]
        for old in shown:
            if (old.message, old.title, old.severity) == (new.message, new.title, new.severity):
                self._unnotify(old, refresh=False)
                shown.remove(old)
                break
        try:
            standing = 1 if self.screen is self.queue else MAX_TOASTS  # over the queue: one (`notify`)
        except ScreenStackError:  # quitting: no screen left to show it on
            return
        for old in shown[: max(0, len(shown) - (standing - 1))]:
            self._unnotify(old, refresh=False)
        super()._on_notify(event)
        self.call_after_refresh(self._drop_empty_toast_holders)

    def _drop_empty_toast_holders(self) -> None:
        """Textual removes a gone toast but not its holder, which keeps its place in the rack: the next
        toast then stands lower, over the rows (a burst of arrivals walked it down the queue)."""
        from textual.widgets._toast import ToastHolder

        try:
            holders = list(self.screen.query(ToastHolder))
        except ScreenStackError:  # quitting
            return
        for holder in holders:
            if not holder.children:
                holder.remove()

    def action_help_quit(self) -> None:
        """Ctrl+C does not quit: say which key does, as plain text (Textual's own says it in markup)."""
        keys = [self.get_key_display(active.binding) for active in self.active_bindings.values()
                if active.binding.action in ("quit", "app.quit", "request_quit", "app.request_quit")]
        keys.sort(key=lambda key: ("^" in key or "ctrl" in key, len(key)))  # the plain key first
        self.notify(f"Press {keys[0] if keys else 'q'} to quit.", title="Ctrl+C does not quit")

    def tell(self, notice: Notice) -> None:
        self.notify(notice.message, title=notice.title, severity=notice.severity, timeout=notice.timeout,
                    markup=False)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """On a small terminal a toast would cover the ask and the keys, and over a step (a dialog over
        the queue) it would cover the step's content and keys at any size: it goes to the status line.
        Never markup, and whatever a caller passed is shown literally (`tui.sanitize`): the last guard."""
        message = safe_plain(message, single_line=False)
        title = safe_plain(title)
        markup = False
        queue = self.queue
        # `is_current` is true for the queue beneath another screen too: only the queue on top has
        # its status line in view.
        try:
            on_top = self.screen is queue
        except ScreenStackError:  # quitting: no screen left to tell
            return
        if not queue.ready:  # told while the app mounts: once the queue can say where it goes
            self.set_timer(0.05, partial(self.notify, message, title=title, severity=severity,
                                         timeout=timeout, markup=markup))
            return
        over_step = not on_top and self.safety.modal_open
        if severity != "error" and over_step and queue.status_line.about is not None:
            return  # the status line says what became of the step's ask: kept (the queue lists arrivals)
        if severity != "error" and ((on_top and queue.compact) or over_step):
            lines = [line for line in message.splitlines() if line.strip()]
            more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
            head = f"{title}: " if title else ""
            style = WARN if severity == "warning" else "bold"
            queue.set_status(Content.assemble((head, style), (lines[0] if lines else "", ""), (more, DIM)),
                             ttl=timeout or 8)
            return
        said = (message, title)
        if on_top:
            # Over the queue a toast is one line on the table's top border, the only one standing: never
            # over a row (the selected row's value included). What it cuts, the status line or the run's
            # history keeps.
            message, title = queue_toast(message, title), ""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
        message, title = said
        if self.seams.toasts is not None:
            self.seams.toasts(Notification(message, title, severity,
                                           self.NOTIFICATION_TIMEOUT if timeout is None else timeout,
                                           markup=markup))
