"""Deciding the selected ask: each key asks the key safety first (`_allowed`), then one call of
`HumanAuthorizer` (`_commit`); the steps (`w`, `r`, `enter`) open over the ask with `push_modal`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from textual.content import Content
from textual.screen import Screen, ScreenResultCallbackType

from core.person import (
    AskDecided,
    DecisionRefused,
    GrantRefused,
    HumanAuthorizer,
    proven_direction,
)
from core.serving.asks import AskKey
from core.wire.response import GrantWidth
from tui.keysafety import Verdict
from tui.render.facts import (
    ask_label,
)
from tui.render.styles import DIM, WARN
from tui.sanitize import safe_plain
from tui.screens.ask_steps import ExpandScreen, ReasonScreen
from tui.screens.grant_steps import GrantConfirmScreen, GrantNoFactsScreen, GrantRefusedScreen
from tui.screens.queue_nav import NavigableQueue

if TYPE_CHECKING:
    pass

R = TypeVar("R")

VERBS = {
    "approve": "approve",
    "approve_session": "approve for this subagent's session",
    "approve_session_both": "approve for this subagent's session in both directions",
    "deny": "deny",
}

class DecidingQueue(NavigableQueue):
    """The single-ask decisions."""

    def action_expand(self) -> None:
        ask = self.current_ask()
        if ask is not None:
            self.push_modal(ExpandScreen(ask))

    def action_scroll_detail(self, lines: int) -> None:
        self.detail.scroll_relative(y=lines, animate=False)

    def push_modal(self, screen: Screen[R], callback: ScreenResultCallbackType[R] | None = None) -> None:
        """A step over the ask: its keys are inert from now until it closes and the ask is painted again."""
        self.safety.open_modal(screen)
        self.app.push_screen(screen, callback)

    def _allowed(self, action: str) -> bool:
        """Ask the safety about this key press; say why when it does not commit."""
        verdict: Verdict = self.safety.press(action, self.key_time())
        if verdict.outcome == "commit":
            return True
        if verdict.outcome == "arm":
            note = " (this ask contains hidden characters)" if verdict.hidden else ""
            expired = "The earlier first press expired. " if verdict.reason == "expired" else ""
            sentence = f"{expired}Press {self.key_for(action)} again to {VERBS.get(action, action)}."
            self.set_status(Content.assemble((sentence, "bold $text-warning"), (note, WARN)),
                            about=self.selected)
        elif verdict.reason in ("not-painted", "in-grace"):
            self.set_status(Content.styled(verdict.why, WARN), about=self.selected)
        self._render_legend()
        return False

    async def _commit(self, call: Callable[[AskKey], Awaitable[object]], key: AskKey) -> bool:
        """Decide one ask; False (and said so) when it could not be decided."""
        self._busy = True
        try:
            await call(key)
            return True
        except (DecisionRefused, GrantRefused) as exc:
            why = safe_plain(str(exc), 300)
            self.app.notify(why, title="Not decided", severity="error", markup=False)
            self.say_after_events(Content.assemble(("Not decided: ", "bold $text-error"), (why, "")))
            return False
        finally:
            self._busy = False
            self._render_legend()

    async def action_approve(self) -> None:
        ask = self.current_ask()
        if ask is not None and self._allowed("approve"):
            await self._commit(self.human.approve_once, ask.key)

    async def action_approve_session(self) -> None:
        await self._approve_session("approve_session", "proven")

    async def action_approve_session_both(self) -> None:
        await self._approve_session("approve_session_both", "family")

    async def _approve_session(self, action: str, width: GrantWidth) -> None:
        ask = self.current_ask()
        if ask is None:
            return
        if ask.request.session_approval is None:
            self.set_status(Content.styled(
                "The child sent no session suggestion, so there is nothing to record: use once or deny.",
                WARN), about=ask.key)
            return
        if width == "family" and proven_direction(HumanAuthorizer.serving_grants_of(ask)) is None:
            self.set_status(Content.styled(
                "Both directions applies only when every grant proves one direction (read or write).", WARN))
            return
        if self._allowed(action):
            async def approve(key: AskKey) -> object:
                return await self.human.approve_for_requester_session(key, width)

            await self._commit(approve, ask.key)

    async def action_deny(self) -> None:
        ask = self.current_ask()
        if ask is not None and self._allowed("deny"):
            await self._commit(self.human.deny, ask.key)

    def action_deny_reason(self) -> None:
        ask = self.current_ask()
        if ask is None or not self._allowed("deny_reason"):
            return
        key = ask.key

        async def done(reason: str | None) -> None:
            if self.human.get(key) is None:
                return  # withdrawn meanwhile: the withdrawal note stays
            if reason is None:
                self.set_status(Content.styled("Back from the reason editor: nothing was decided.", DIM),
                                about=key)
                return

            async def deny_with_reason(k: AskKey) -> object:
                return await self.human.deny(k, reason)

            await self._commit(deny_with_reason, key)

        self.push_modal(ReasonScreen(ask), done)

    def action_approve_serving(self) -> None:
        ask = self.current_ask()
        if ask is None or not self._allowed("approve_serving"):
            return
        key = ask.key
        if not ask.has_facts:
            self.set_status(Content.styled(
                "No whole-session grant for an ask without facts; nothing was decided.", WARN))
            self.push_modal(GrantNoFactsScreen(ask, self.key_for("approve"),
                                                self.key_for("approve_session")))
            return
        try:
            refusal = self.human.serving_grant_refusal(key)
            grants = self.human.serving_grants(key)
            reach = self.human.grant_reach(key)
        except DecisionRefused as exc:
            self.app.notify(safe_plain(str(exc), 300), title="Not decided", severity="error", markup=False)
            return
        if refusal is not None:
            self.set_status(Content.assemble(("Whole-session grant refused: ", "bold $text-error"),
                                             (safe_plain(refusal, 300), "")), about=key)
            self.push_modal(GrantRefusedScreen(ask, refusal))
            return

        async def done(confirmed: bool | None) -> None:
            if self.human.get(key) is None:
                return  # withdrawn meanwhile: the withdrawal note stays
            if not confirmed:
                self.set_status(Content.styled("Whole-session grant cancelled: nothing was decided.", DIM),
                                about=key)
                return
            granted: list[AskDecided] = []

            async def grant(key: AskKey) -> None:
                granted.append(await self.human.approve_for_serving_session(key))

            await self._commit(grant, key)
            also = granted[0].also if granted else ()
            if also:
                self.say_after_events(Content.assemble(
                    ("Recorded the whole-session grant: ", "bold"), (ask_label(ask), ""),
                    (f" — and it decided {len(also)} other pending ask{'s' if len(also) != 1 else ''}.",
                     "bold")))

        self.push_modal(GrantConfirmScreen(ask, grants, reach, self.safety, self.key_time), done)

