"""The app's other views and keys: history, grants, sessions, help, the rule from an ask, the
command palette (it lists every action and never decides), and the review of a widening config
change. Screens not shown at start are imported when first opened: the first frame waits for
nothing it does not show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from core.history import HistoryStore
from core.judging.recorded import RecordedAuthority
from core.person import HumanAuthorizer
from core.rules import PolicyStore
from core.serving import ServingCore
from core.wiring import AttendedNode
from tui.keysafety import KeySafety
from tui.sanitize import safe_plain
from tui.screens.ask_steps import ExpandScreen, ReasonScreen
from tui.screens.batch_preview import BatchPreviewScreen
from tui.screens.grant_steps import GrantConfirmScreen, GrantNoFactsScreen, GrantRefusedScreen
from tui.screens.history import HistoryEntry, HistoryScreen
from tui.screens.queue import QueueScreen
from tui.screens.queue_view import GUARDED
from tui.screens.quit import QuitConfirmScreen
from tui.settings import UiSettings

if TYPE_CHECKING:
    from core.rules.reloads import PendingReload


class Views(App[int]):
    """The views of `AuthorizerApp` (its base class)."""

    node: AttendedNode
    core: ServingCore
    human: HumanAuthorizer
    settings: UiSettings
    queue: QueueScreen
    history: list[HistoryEntry]
    safety: KeySafety
    clock: Callable[[], float]
    key_time: Callable[[], float]
    store: HistoryStore | None
    authority: RecordedAuthority | None
    rules: PolicyStore | None
    _keymap_ids: dict[str, str]

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

            store, rules = self.store, self.rules
            self._show(lambda: ReviewScreen(store, rules), ReviewScreen)
        else:
            self._show(lambda: HistoryScreen(self.history), HistoryScreen)

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
        from tui.screens.review_steps import ConfirmRuleScreen

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

        authority = self.authority
        if authority is None:
            self.notify("This authorizer records no whole-session grants.", markup=False)
            return
        self._show(lambda: GrantsScreen(authority), GrantsScreen)

    def action_sessions(self) -> None:
        from tui.screens.sessions import SessionsScreen

        self._show(lambda: SessionsScreen(self.core.served, self.node.take_session), SessionsScreen)

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
                path = safe_plain(str(pending.path))
                self.notify(f"Config change NOT applied; the rules in force stay: {path}",
                            severity="warning", markup=False)
            elif authority.accept(pending):
                self.notify(f"Config change applied: {safe_plain(str(pending.path))}", markup=False)
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
