"""`AuthorizerApp`: the person at the terminal slot of a running `ServingCore`.

The app is handed a built `ServingCore` and the `HumanAuthorizer` it escalates to, runs
`core.run()` as a worker in its own event loop, and stops it on quit (heartbeats removed; pending
requests stay in their inbox for the next authorizer). All decisions go through `HumanAuthorizer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker

from core.asks import Ask, AskKey
from core.clock import SYSTEM_CLOCK, KeyClock
from core.history import HistoryStore
from core.human import AskAdded, AskDecided, AskWithdrawn, HumanAuthorizer, HumanEvent
from core.judging import RecordedAuthority
from core.keysafety import KeyRules, KeySafety
from core.rules.reloads import PendingReload
from core.serving import ServeEvent, ServingCore
from tui.sanitize import safe_plain
from tui.screens.history import HistoryEntry, HistoryScreen
from tui.screens.modals import (
    AskModal,
    BatchPreviewScreen,
    ExpandScreen,
    GrantConfirmScreen,
    GrantNoFactsScreen,
    GrantRefusedScreen,
    QuitConfirmScreen,
    ReasonScreen,
)
from tui.screens.queue import GUARDED, QueueScreen, ask_label
from tui.settings import NOTIFICATION_CHANNELS, UiSettings, dialog_keymap
from tui.widgets.ask_view import DIM, WARN

if TYPE_CHECKING:
    from core.rules.reloads import PendingReload

# Screens not shown at start (grants, help, review, sessions, config review) and the rule
# suggester are imported when first opened: the first frame waits for nothing it does not show.

ATTENTION_COALESCE_S = 0.05
ARM_EXPIRY_S = 5.0
#: Outcomes of decisions the person keyed: the app's history already has them from `AskDecided`.
PERSON_OUTCOMES = frozenset({"user", "user_grant", "session_grant"})
WHO = {"approved_by_serving_grant": "grant"}
#: After SIGHUP/SIGTERM, how long the graceful quit may take before the app exits without it.
FORCED_EXIT_S = 0.9
#: Leave the alternate screen, show the cursor, stop mouse reporting (what Textual's exit undoes).
_RESTORE_SEQUENCE = b"\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l"


def restore_terminal_modes() -> None:
    """Best effort, from any thread, when Textual's own exit did not run: a usable shell prompt."""
    with contextlib.suppress(OSError):
        os.set_blocking(1, False)
        os.write(1, _RESTORE_SEQUENCE)
    with contextlib.suppress(OSError, termios.error):
        attrs = termios.tcgetattr(0)
        attrs[3] |= termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN
        termios.tcsetattr(0, termios.TCSANOW, attrs)


def detach_from_terminal() -> None:
    """The terminal is gone: point stdin/stdout/stderr at /dev/null so no read or write blocks or fails."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)


def osc_sequence(channel: str, title: str, body: str, tmux: bool) -> str:
    """The terminal signal for one channel; OSC wrapped for tmux passthrough when inside tmux."""
    if channel == "bell":
        return "\a"
    sequence = (
        f"\x1b]9;{title}: {body}\x07" if channel == "osc9" else f"\x1b]777;notify;{title};{body}\x07"
    )
    if tmux:
        return "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return sequence


def _signal_safe(text: str) -> str:
    """Only plain printable ASCII (no `;`) goes inside an OSC sequence."""
    return "".join(c for c in text if 32 <= ord(c) < 127 and c != ";")[:120]


class AuthorizerApp(App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute, so subclasses elsewhere find it
    TITLE = "pi-authorizer"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: every action of the screen, by name (none decides an ask)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help", key_display="?", id="app.help",
                tooltip="Every key, and how the safety guards work"),
        Binding("h", "history", "History", id="app.history",
                tooltip="Every ask served: filter, details, rule suggestions"),
        Binding("S", "sessions", "Sessions", id="app.sessions",
                tooltip="Served sessions, env lines, other inboxes (adopt unserved ones)"),
        Binding("R", "rule_from_ask", "Rule from ask", id="app.rule_from_ask",
                tooltip="Propose the persistent rule that would have decided the selected ask "
                "(JSON, file, diff; written only when you confirm)"),
        Binding("W", "grants", "Grants", id="app.grants",
                tooltip="Whole-session grants: who made them, what they decided; revoke one"),
        Binding("q", "quit", "Quit", id="app.quit",
                tooltip="Stop serving; pending asks stay in the inbox for the next authorizer"),
    ]

    def __init__(
        self,
        core: ServingCore,
        human: HumanAuthorizer,
        settings: UiSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
        key_clock: KeyClock | None = None,
    ) -> None:
        """`clock`: wall time for ages; `key_clock`: the monotonic clock of key safety (tests pass a fake)."""
        super().__init__()
        self.core = core
        self.human = human
        self.settings = settings or UiSettings()
        self.clock = clock
        self.key_clock: KeyClock = key_clock or SYSTEM_CLOCK
        self._key_at: float | None = None
        self.history: list[HistoryEntry] = []
        self.signals: list[str] = []
        self.safety = KeySafety(self.key_clock.monotonic, KeyRules(
            grace_s=max(0, self.settings.input_grace_ms) / 1000,
            double_press=self.settings.double_press,
            arm_expiry_s=ARM_EXPIRY_S,
        ))
        self.queue = QueueScreen(human, self.settings, clock, self.safety, self.key_time)
        self.store = core.ledger if isinstance(core.ledger, HistoryStore) else None
        self.authority = core.judge if isinstance(core.judge, RecordedAuthority) else None
        self.rules = self.authority.store if self.authority is not None else None
        self._shown: set[AskKey] = set()
        self.queue.on_shown = self._mark_shown
        self.queue.sessions_served = lambda: len(core.sessions)
        self._tmux = bool(os.environ.get("TMUX"))
        self._new_asks: list[Ask] = []
        self._attention_timer: Timer | None = None
        self._core_worker: Worker[None] | None = None
        self._stopping = False
        self._forced_exit: threading.Timer | None = None
        self._exiting = threading.Lock()
        #: Run (from another thread) when a signal's graceful quit times out, before `os._exit`.
        self.forced_exit_cleanups: list[Callable[[], None]] = []
        self._keymap_ids: dict[str, str] = {}
        reserved = frozenset(
            key for binding in (*QueueScreen.BINDINGS, *self.BINDINGS) if isinstance(binding, Binding)
            and binding.id not in {"ask.approve", "ask.approve_session", "ask.approve_session_both",
                                   "ask.deny", "ask.deny_reason"}
            for key in binding.key.split(",")
        ) | {"?"}
        keymap, self.refused_keys = dialog_keymap(self.settings.dialog_keys, reserved)
        if keymap:
            self.set_keymap(keymap)

    # -- keymap bookkeeping (for the help screen) ------------------------------------------------

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
        self.human.subscribe(self._on_human)
        self.core.subscribe(self._on_serve)
        self.push_screen(self.queue)
        if self.authority is not None:
            self.authority.on_pending.append(self._pending_reload)
            for pending in self.authority.store.pending():
                self.call_later(self._review_reload, pending)
        self._core_worker = self.run_worker(self._serve(), name="serving-core", exit_on_error=False)
        if not self.is_headless:
            self._install_signal_handlers()
        if self.refused_keys:
            refused = "; ".join(self.refused_keys)
            self.notify(f"Ignored permissionDialogKeys entries (defaults kept): {refused}",
                        severity="warning", markup=False, timeout=10)

    async def _serve(self) -> None:
        try:
            await self.core.run()
        except Exception as exc:
            self.sub_title = "NOT SERVING"
            self.notify(f"The serving core stopped: {exc}", title="Not serving", severity="error",
                        markup=False, timeout=60)
            raise
        if not self._stopping:
            self.sub_title = "NOT SERVING"
            self.notify("The serving core stopped.", severity="error", markup=False, timeout=60)

    def _install_signal_handlers(self) -> None:
        """A closed terminal (SIGHUP) or a kill (SIGTERM) still removes heartbeats and locks.

        Plain `signal.signal` handlers, not the loop's: they run in the main thread even while the
        event loop is stuck writing to a terminal that is gone (Textual's output queue is bounded
        and its writer thread dies on the first EIO), which is where a loop handler never runs.
        """
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to install
                signal.signal(sig, lambda signum, _frame: self._signalled(signum, loop))

    def _signalled(self, signum: int, loop: asyncio.AbstractEventLoop) -> None:
        if signum == signal.SIGHUP:
            detach_from_terminal()
        if self._forced_exit is None:
            self._forced_exit = threading.Timer(
                FORCED_EXIT_S, self._force_exit, (128 + signum, signum != signal.SIGHUP)
            )
            self._forced_exit.daemon = True
            self._forced_exit.start()
        quit_now = self._quit_after_hangup() if signum == signal.SIGHUP else self._quit_now()
        loop.call_soon_threadsafe(
            lambda: self.run_worker(quit_now, name="quit-on-signal", exclusive=True, group="quit")
        )

    def exit_process_if_signalled(self) -> None:
        """After a signal, once the command has done its printing: run the forced-exit cleanups and
        end the process now (exclusive with the watchdog's exit). Tearing down the interpreter (every
        Textual object) took up to a second on a busy machine, and the daemon watchdog cannot act
        during that teardown."""
        if self._forced_exit is None:
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        logging.shutdown()
        self._force_exit(0)

    async def _quit_after_hangup(self) -> None:
        """No terminal is left to restore: stop serving (heartbeats, locks, history), clean up, exit."""
        await self.stop_serving()
        self._force_exit(0)

    def _force_exit(self, code: int, restore_terminal: bool = False) -> None:
        """The graceful quit did not finish in time: do its essential part from this thread, exit.

        One thread at a time (the watchdog's and the quit's may both get here): the one that comes
        second waits for the exit instead of ending the process in the middle of the cleanups."""
        self._exiting.acquire()  # never released: this thread ends the process
        if restore_terminal:
            restore_terminal_modes()
        for served in list(self.core.sessions.values()):
            with contextlib.suppress(Exception):
                served.heartbeat.clear()
            with contextlib.suppress(Exception):
                served.lock.release()
        for cleanup in self.forced_exit_cleanups:
            with contextlib.suppress(Exception):
                cleanup()
        os._exit(code)

    async def stop_serving(self) -> None:
        """Stop the core and wait for it: heartbeats removed, locks released, requests left."""
        self._stopping = True
        self.core.stop()
        worker = self._core_worker
        if worker is not None:
            with contextlib.suppress(Exception):  # a failure was already reported by `_serve`
                await worker.wait()

    async def action_quit(self) -> None:
        pending = len(self.human.pending())
        if pending:
            async def answered(confirmed: bool | None) -> None:
                if confirmed:
                    await self._quit_now()

            await self.push_screen(QuitConfirmScreen(pending), answered)
            return
        await self._quit_now()

    async def _quit_now(self) -> None:
        await self.stop_serving()
        self.exit(0)

    # -- views -----------------------------------------------------------------------------------

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

            store, rules = self.store, self.rules
            self._show(lambda: ReviewScreen(store, rules), ReviewScreen)
        else:
            self._show(lambda: HistoryScreen(self.history), HistoryScreen)

    def _mark_shown(self, key: AskKey) -> None:
        if self.store is not None and key not in self._shown:
            self._shown.add(key)
            self.store.mark_shown(key)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "rule_from_ask":
            return self.screen is self.queue  # it reads the queue's selected ask
        return True

    def action_rule_from_ask(self) -> None:
        ask = self.queue.current_ask()
        if ask is None or self.rules is None:
            self.notify("No ask selected, or this authorizer has no rules to add to.", markup=False)
            return
        from core.history.suggest import SuggestionRefused, suggestion_from_ask
        from tui.screens.review import ConfirmRuleScreen

        intent = ask.parsed.access_intent
        try:
            offer = suggestion_from_ask(
                self.rules,
                intent.surface if intent else None,
                intent.match_values if intent else (),
                [(g.surface, g.pattern) for g in HumanAuthorizer.serving_grants_of(ask)],
                intent.principal.agent_name if intent else ask.request.requester_agent_name,
                self.clock(),
            )
        except SuggestionRefused as exc:
            self.notify(safe_plain(str(exc), 300), title="No rule proposed", severity="warning", markup=False)
            return
        self.queue.push_modal(ConfirmRuleScreen(offer, self.rules, self.safety, self.key_time))

    def action_grants(self) -> None:
        from tui.screens.grants import GrantsScreen

        authority = self.core.judge
        if not isinstance(authority, RecordedAuthority):
            self.notify("This authorizer records no whole-session grants.", markup=False)
            return
        self._show(lambda: GrantsScreen(authority), GrantsScreen)

    def action_sessions(self) -> None:
        from tui.screens.sessions import SessionsScreen

        self._show(lambda: SessionsScreen(self.core, self.human), SessionsScreen)

    def help_groups(self) -> list[tuple[str, Sequence[BindingType]]]:
        """Every screen's bindings, as the help screen lists them (the history view this app uses)."""
        from tui.screens.grants import GrantsScreen
        from tui.screens.reload import ReloadReviewScreen
        from tui.screens.review import ConfirmRuleScreen, DetailScreen, ReviewScreen, SuggestionsScreen
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
            ("Everywhere", [*self.BINDINGS, Binding(self.COMMAND_PALETTE_BINDING, "command_palette",
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
        ]

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        sections: list[tuple[str, list[tuple[str, Binding]]]] = []
        for title, bindings in self.help_groups():
            rows = [(self.keys_of(b), b) for b in bindings if isinstance(b, Binding)]
            sections.append((title, rows))
        self.push_screen(HelpScreen(sections))

    # -- config changes that widen (held by the core until the person decides) -------------------

    def _pending_reload(self, pending: PendingReload) -> None:
        self.call_later(self._review_reload, pending)

    def _review_reload(self, pending: PendingReload) -> None:
        from tui.screens.reload import ReloadReviewScreen

        authority = self.authority
        if authority is None or pending not in authority.store.pending():
            return  # superseded by a newer change, which has its own review

        def decided(accept: bool | None) -> None:
            if not accept:
                authority.decline(pending)
                self.notify(f"Config change NOT applied; the rules in force stay: {pending.path}",
                            severity="warning", markup=False)
            elif authority.accept(pending):
                self.notify(f"Config change applied: {pending.path}", markup=False)
            else:
                self.notify("That config change was superseded by a newer one (reviewed next).",
                            severity="warning", markup=False)

        self.push_screen(ReloadReviewScreen(pending, self.settings.input_grace_ms), decided)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette: every action of the screen it was opened on, with its key.

        Choosing a decision only says which key takes it: no palette entry (and so no click)
        decides an ask."""
        seen: set[str] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if binding.action in seen or binding.action == "command_palette":
                continue
            seen.add(binding.action)
            keys = self.keys_of(binding)
            title = f"{binding.description} ({keys})"
            name = binding.action.partition("(")[0]
            if isinstance(active.node, QueueScreen) and name in GUARDED:
                yield SystemCommand(title, "A decision: press its key on the ask (the palette never decides)",
                                    partial(self._say_key, binding.description, keys))
            else:
                yield SystemCommand(title, binding.tooltip or binding.description,
                                    partial(self.run_action, binding.action, active.node))

    def _say_key(self, description: str, keys: str) -> None:
        self.notify(f"{description}: press {keys} with the ask on screen.", markup=False)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """On a small terminal a toast would cover the ask and the keys: it goes to the status line."""
        queue = self.queue
        if severity != "error" and queue.is_current and queue.compact:
            lines = [line for line in message.splitlines() if line.strip()]
            more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
            head = f"{title}: " if title else ""
            style = WARN if severity == "warning" else "bold"
            queue.set_status(Content.assemble((head, style), (lines[0] if lines else "", ""), (more, DIM)),
                             ttl=timeout or 8)
            return
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # -- events from the core ------------------------------------------------------------------

    def _on_human(self, event: HumanEvent) -> None:
        """Synchronous, on the event loop: the queue is consistent as soon as a decision returns."""
        if isinstance(event, AskDecided):
            reason = event.response.denial_reason
            detail = f"reason: {safe_plain(reason, 120)}" if reason else ""
            if event.response.session_grant_width == "family":
                detail = "both directions (read and write)"
            self.history.append(HistoryEntry(self.clock(), event.kind, WHO.get(event.kind, "you"),
                                             ask_label(event.ask), detail))
        elif isinstance(event, AskWithdrawn):
            self.history.append(HistoryEntry(self.clock(), "withdrawn", "child", ask_label(event.ask),
                                             "the child stopped waiting; never answered"))
            self.notify(f"{ask_label(event.ask)}\nThe child stopped waiting; it can no longer be answered "
                        "(not a denial).", title="Ask withdrawn", severity="warning", markup=False, timeout=8)
            self._abandon_modals(event.ask)
        self.queue.handle_event(event)
        if isinstance(event, AskAdded):
            self._new_asks.append(event.ask)
            if self._attention_timer is None:
                self._attention_timer = self.set_timer(ATTENTION_COALESCE_S, self._flush_attention)

    def _abandon_modals(self, ask: Ask) -> None:
        screen = self.screen
        if isinstance(screen, AskModal) and screen.ask_key == ask.key:
            if isinstance(screen, GrantConfirmScreen):
                screen.dismiss(False)
            else:
                screen.dismiss(None)

    def _on_serve(self, event: ServeEvent) -> None:
        if event.kind == "answered" and event.outcome not in PERSON_OUTCOMES and event.response is not None:
            label = "?"
            if event.parsed is not None:
                req = event.parsed.request
                intent = event.parsed.access_intent
                surface = intent.surface if intent else (req.surface or "?")
                value = intent.match_values[0] if intent and intent.match_values else (req.value or "")
                label = (f"{safe_plain(req.requester_agent_name, 24)} {safe_plain(surface, 20)} "
                         f"{safe_plain(value, 60)}")
            source = event.response.decided_by
            granted = source is not None and source.kind == "session_approval"
            who = "grant" if granted else event.outcome or "?"
            self.history.append(HistoryEntry(self.clock(), event.response.state, who, label))
        elif event.kind == "quarantined":
            name = safe_plain(event.key.name, 60)
            self.history.append(HistoryEntry(self.clock(), "quarantined", "core", name,
                                             safe_plain(event.reason, 160)))
            self.notify(f"Unusable request file set aside: {safe_plain(event.reason, 200)}",
                        title="Request quarantined", severity="warning", markup=False)
        elif event.kind == "forged":
            self.history.append(HistoryEntry(self.clock(), "forged", "someone else",
                                             safe_plain(event.key.name, 60), safe_plain(event.reason, 160)))
            self.notify(safe_plain(event.reason, 300), title="Forged response", severity="error",
                        markup=False, timeout=30)
        elif event.kind == "not_serving":
            self.sub_title = f"NOT SERVING {safe_plain(event.key.session_id, 40)}"
            self.notify(f"Session {safe_plain(event.key.session_id, 60)} cannot be served: "
                        f"{safe_plain(event.reason, 200)}", title="Not serving", severity="error",
                        markup=False, timeout=60)
        elif event.kind == "serving_again":
            if self.sub_title.startswith("NOT SERVING "):
                self.sub_title = ""
            self.notify(f"Serving session {safe_plain(event.key.session_id, 60)} again.", markup=False)
        elif event.kind == "unsafe_folder":
            self.history.append(HistoryEntry(self.clock(), "unsafe folder", "core",
                                             safe_plain(event.key.session_id, 60),
                                             safe_plain(event.reason, 200)))
            self.notify(f"{safe_plain(event.reason, 300)}\nNothing is read or written through it.",
                        title="Session folder refused", severity="error", markup=False, timeout=15)

    # -- attention -------------------------------------------------------------------------------

    @property
    def signal_channels(self) -> tuple[str, ...]:
        extra = [c for c in self.settings.prompt_notifications if c in NOTIFICATION_CHANNELS and c != "bell"]
        return ("bell", *dict.fromkeys(extra))

    def _flush_attention(self) -> None:
        self._attention_timer = None
        asks = [a for a in self._new_asks if self.human.get(a.key) is not None]
        self._new_asks.clear()
        if not asks:
            return
        if len(asks) == 1:
            body = ask_label(asks[0])
            title = "Permission asked"
        else:
            body = "\n".join(ask_label(a) for a in asks[:5]) + ("\n…" if len(asks) > 5 else "")
            title = f"{len(asks)} permissions asked"
        self.notify(body, title=title, markup=False, timeout=8)
        pending = len(self.human.pending())
        plain = _signal_safe(f"{pending} pending ask{'s' if pending != 1 else ''}")
        for channel in self.signal_channels:
            self.emit_terminal_signal(osc_sequence(channel, "pi-authorizer", plain, self._tmux))

    def emit_terminal_signal(self, sequence: str) -> None:
        """Write a bell / OSC notification to the terminal; recorded in `signals` for tests."""
        self.signals.append(sequence)
        driver = self._driver
        if driver is not None and not self.is_headless:
            driver.write(sequence)
            driver.flush()
