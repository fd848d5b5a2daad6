"""`AuthorizerApp`: the person at the terminal slot of a running `ServingCore`.

The app is handed a built `ServingCore` and the `HumanAuthorizer` it escalates to, runs
`core.run()` as a worker in its own event loop, and stops it on quit (heartbeats removed; pending
requests stay in their inbox for the next authorizer). All decisions go through `HumanAuthorizer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker

from core.asks import Ask, AskKey
from core.history import HistoryStore
from core.human import AskAdded, AskDecided, AskWithdrawn, HumanAuthorizer, HumanEvent
from core.judging import RecordedAuthority
from core.serving import ServeEvent, ServingCore
from tui.sanitize import safe_plain
from tui.screens.help import HelpScreen
from tui.screens.history import HistoryEntry, HistoryScreen
from tui.screens.modals import (
    AskModal,
    BatchPreviewScreen,
    ExpandScreen,
    GrantConfirmScreen,
    GrantRefusedScreen,
    QuitConfirmScreen,
    ReasonScreen,
)
from tui.screens.queue import GUARDED, QueueScreen, ask_label
from tui.screens.review import ConfirmRuleScreen, DetailScreen, ReviewScreen, SuggestionsScreen
from tui.screens.sessions import SessionsScreen
from tui.settings import NOTIFICATION_CHANNELS, UiSettings, dialog_keymap
from tui.widgets.ask_view import DIM, WARN
from tui.widgets.history_list import HistoryList

ATTENTION_COALESCE_S = 0.05


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
    ) -> None:
        super().__init__()
        self.core = core
        self.human = human
        self.settings = settings or UiSettings()
        self.clock = clock
        self.history: list[HistoryEntry] = []
        self.signals: list[str] = []
        self.queue = QueueScreen(human, self.settings, clock)
        self.store = core.ledger if isinstance(core.ledger, HistoryStore) else None
        self.rules = core.judge.store if isinstance(core.judge, RecordedAuthority) else None
        self._shown: set[AskKey] = set()
        self.queue.on_shown = self._mark_shown
        self.queue.sessions_served = lambda: len(core.sessions)
        self._tmux = bool(os.environ.get("TMUX"))
        self._new_asks: list[Ask] = []
        self._attention_timer: Timer | None = None
        self._core_worker: Worker[None] | None = None
        self._stopping = False
        self._keymap_ids: dict[str, str] = {}
        reserved = frozenset(
            key for binding in (*QueueScreen.BINDINGS, *self.BINDINGS) if isinstance(binding, Binding)
            and binding.id not in {"ask.approve", "ask.approve_session", "ask.deny", "ask.deny_reason"}
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

    # -- lifecycle -------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.human.subscribe(self._on_human)
        self.core.subscribe(self._on_serve)
        self.push_screen(self.queue)
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
        """A closed terminal (SIGHUP) or a kill (SIGTERM) still removes heartbeats and locks."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._signalled)

    def _signalled(self) -> None:
        self.run_worker(self._quit_now(), name="quit-on-signal", exclusive=True, group="quit")

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
            store, rules = self.store, self.rules
            self._show(lambda: ReviewScreen(store, rules), ReviewScreen)
        else:
            self._show(lambda: HistoryScreen(self.history), HistoryScreen)

    def _mark_shown(self, key: AskKey) -> None:
        if self.store is not None and key not in self._shown:
            self._shown.add(key)
            self.store.mark_shown(key)

    def action_sessions(self) -> None:
        self._show(lambda: SessionsScreen(self.core, self.human), SessionsScreen)

    def help_groups(self) -> list[tuple[str, Sequence[BindingType]]]:
        """Every screen's bindings, as the help screen lists them (the history view this app uses)."""
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
            ("Reason editor (keys type into the field; none decides)", ReasonScreen.BINDINGS),
            ("Expanded ask", ExpandScreen.BINDINGS),
            ("Quit confirmation", QuitConfirmScreen.BINDINGS),
            ("Sessions view (S)", SessionsScreen.BINDINGS),
            *history,
        ]

    def action_help(self) -> None:
        sections: list[tuple[str, list[tuple[str, Binding]]]] = []
        for title, bindings in self.help_groups():
            rows = [(self.keys_of(b), b) for b in bindings if isinstance(b, Binding)]
            sections.append((title, rows))
        self.push_screen(HelpScreen(sections))

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
            self.history.append(HistoryEntry(self.clock(), event.kind, "you", ask_label(event.ask),
                                             f"reason: {safe_plain(reason, 120)}" if reason else ""))
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
        if event.kind == "answered" and event.outcome not in (None, "user") and event.response is not None:
            label = "?"
            if event.parsed is not None:
                req = event.parsed.request
                intent = event.parsed.access_intent
                surface = intent.surface if intent else (req.surface or "?")
                value = intent.match_values[0] if intent and intent.match_values else (req.value or "")
                label = (f"{safe_plain(req.requester_agent_name, 24)} {safe_plain(surface, 20)} "
                         f"{safe_plain(value, 60)}")
            self.history.append(HistoryEntry(self.clock(), event.response.state, event.outcome or "?", label))
        elif event.kind == "quarantined":
            name = safe_plain(event.key.name, 60)
            self.history.append(HistoryEntry(self.clock(), "quarantined", "core", name,
                                             safe_plain(event.reason, 160)))
            self.notify(f"Unusable request file set aside: {safe_plain(event.reason, 200)}",
                        title="Request quarantined", severity="warning", markup=False)

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
