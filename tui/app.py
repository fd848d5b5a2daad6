"""`AuthorizerApp`: the person at the terminal slot of a running `ServingCore`.

The app is handed a built node (`core.wiring.AttendedNode`: the `ServingCore`, the
`HumanAuthorizer` it escalates to, its recorded authority and history, each by name), runs
`core.run()` as a worker in its own event loop, and stops it on quit (heartbeats removed; pending
requests stay in their inbox for the next authorizer). All decisions go through `HumanAuthorizer`.

Its parts, by area: `app_views.py` (other screens, help, palette, config reviews),
`app_events.py` (the core's events), `attention.py` (toasts, bell, OSC), `app_signals.py` (quit,
SIGHUP/SIGTERM).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.worker import Worker

from core.clock import SYSTEM_CLOCK, KeyClock
from core.serving.asks import Ask, AskKey
from core.wiring import AttendedNode
from tui.app_events import CoreEvents
from tui.app_signals import SignalQuit
from tui.app_views import Views
from tui.keysafety import KeyRules, KeySafety
from tui.render.styles import DIM, WARN
from tui.sanitize import safe_plain
from tui.screens.history import HistoryEntry
from tui.screens.queue import QueueScreen
from tui.screens.quit import QuitConfirmScreen
from tui.settings import UiSettings, dialog_keymap

ARM_EXPIRY_S = 5.0


class AuthorizerApp(Views, CoreEvents, SignalQuit):
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
        Binding("R", "rule_from_ask", "Rule", id="app.rule_from_ask",
                tooltip="Propose the persistent rule that would have decided the selected ask "
                "(JSON, file, diff; written only when you confirm)"),
        Binding("W", "grants", "Grants", id="app.grants",
                tooltip="Whole-session grants: who made them, what they decided; revoke one"),
        Binding("q", "quit", "Quit", id="app.quit",
                tooltip="Stop serving; pending asks stay in the inbox for the next authorizer"),
    ]

    def __init__(
        self,
        node: AttendedNode,
        settings: UiSettings | None = None,
        *,
        clock: Callable[[], float] = SYSTEM_CLOCK.wall,
        key_clock: KeyClock | None = None,
    ) -> None:
        """`clock`: wall time for ages; `key_clock`: the monotonic clock of key safety (tests pass a fake)."""
        super().__init__()
        self.node = node
        self.core = core = node.core
        self.human = human = node.person
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
        self.store = node.history
        self.authority = node.authority
        self.rules = self.authority.store if self.authority is not None else None
        self._shown: set[AskKey] = set()
        self.queue.on_shown = self._mark_shown
        self.queue.sessions_served = lambda: len(core.served)
        self._tmux = bool(os.environ.get("TMUX"))
        self._new_asks: list[Ask] = []
        self._attention_timer: Timer | None = None
        self._core_worker: Worker[None] | None = None
        self._stopping = False
        self._forced_exit: threading.Timer | None = None
        self._exiting = threading.Lock()
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
        self.listen()
        self.push_screen(self.queue)
        if self.authority is not None:
            self.authority.on_pending.append(self._pending_reload)
            for pending in self.authority.store.pending():
                self.call_later(self._review_reload, pending)
        self._core_worker = self.run_worker(self._serve(), name="serving-core", exit_on_error=False)
        if not self.is_headless:
            self._install_signal_handlers()
        if self.refused_keys:
            refused = safe_plain("; ".join(self.refused_keys), 400)
            self.notify(f"Ignored permissionDialogKeys entries (defaults kept): {refused}",
                        severity="warning", markup=False, timeout=10)

    async def _serve(self) -> None:
        try:
            await self.core.run()
        except Exception as exc:
            self.sub_title = "NOT SERVING"
            self.notify(f"The serving core stopped: {safe_plain(str(exc), 400)}", title="Not serving",
                        severity="error", markup=False, timeout=60)
            raise
        if not self._stopping:
            self.sub_title = "NOT SERVING"
            self.notify("The serving core stopped.", severity="error", markup=False, timeout=60)

    async def action_quit(self) -> None:
        pending = len(self.human.pending())
        if pending:
            async def answered(confirmed: bool | None) -> None:
                if confirmed:
                    await self._quit_now()

            await self.push_screen(QuitConfirmScreen(pending), answered)
            return
        await self._quit_now()

    # -- views -----------------------------------------------------------------------------------

    def _mark_shown(self, key: AskKey) -> None:
        if self.store is not None and key not in self._shown:
            self._shown.add(key)
            self.store.mark_shown(key)

    # -- notices ---------------------------------------------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """On a small terminal a toast would cover the ask and the keys: it goes to the status line.
        Never markup, and whatever a caller passed is shown literally (`tui.sanitize`): the last guard."""
        message = safe_plain(message, single_line=False)
        title = safe_plain(title)
        markup = False
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

