"""The review screen in a tiny host app: virtualised list, filters, details, summary, suggestions."""

from __future__ import annotations

import json
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any

from textual.app import App
from textual.widgets import Input, Static

from core.history import HistoryFilter, HistoryReader, HistoryStore, Summary
from core.history.rows import facts_columns
from core.rules import PolicyStore
from core.wire.reader import parse_request
from tests.helpers import request_body
from tests.history.support import S, intent, suggestion
from tests.tui.support import wait_for
from tui.screens.review import ReviewScreen
from tui.screens.review_steps import ConfirmRuleScreen, DetailScreen, SuggestionsScreen
from tui.widgets.history_list import HistoryList

HOSTILE = "rm -rf /\x1b[31m\u202eevil [@click=app.quit]x[/]"


class Host(App[None]):
    def __init__(self, store: HistoryStore, rules: PolicyStore | None = None) -> None:
        super().__init__()
        self.store, self.rules = store, rules

    def on_mount(self) -> None:
        self.push_screen(ReviewScreen(self.store, self.rules))


def rows(n: int, **overrides: Any) -> list[dict[str, object]]:
    now = time.time()
    out = []
    for i in range(n):
        value = overrides.get("value", f"ls {i}")
        agent = "Plan" if i % 3 == 0 else "Explore"
        extra: dict[str, Any] = {
            "accessIntent": intent("bash", value, agent=agent),
            "sessionApproval": suggestion("bash", overrides.get("pattern", "ls *")),
        }
        parsed = parse_request(json.dumps(request_body(f"r{i}", S, **extra)).encode())
        out.append(
            {
                "served_session": S,
                "request_name": f"r{i}.json",
                "arrived_at": now - n + i,
                "outcome": "user",
                "verdict": "approved" if i % 4 else "denied",
                "decide_ms": 1000.0 + i,
                "decider": "person (dialog)",
                "raw": parsed.raw,
                **facts_columns(parsed),
            }
        )
    return out


def visible_text(widget: HistoryList) -> str:
    return "\n".join(widget.render_line(y).text for y in range(widget.size.height))


async def test_opens_virtualised_and_summarised(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3")
    store.insert_rows(rows(3000))
    async with Host(store).run_test(size=(120, 30)) as pilot:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        listing = pilot.app.screen.query_one(HistoryList)
        assert len(listing.ids) == 3000 and listing.pages_loaded == 1
        assert "ls 2999" in visible_text(listing).splitlines()[0]  # newest first
        summary = str(pilot.app.screen.query_one("#review-summary", Static).render())
        assert "3,000 asks" in summary and "Explore 2,000, Plan 1,000" in summary
        assert "75% approved" in summary  # the median in seconds, as `pi-authorizer history` writes it
        assert summary.split("median person decision ")[1].startswith(("2.499s", "2.500s"))
        await pilot.press("end")
        assert listing.cursor == 2999 and listing.pages_loaded == 2


async def test_child_text_is_shown_as_tokens_never_as_markup(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3")
    store.insert_rows(rows(3, value=HOSTILE))
    async with Host(store).run_test(size=(160, 20)) as pilot:
        await pilot.pause()
        text = visible_text(pilot.app.screen.query_one(HistoryList))
        assert "␛[31m⟨U+202E RLO⟩evil [@click=app.quit]x[/]" in text
        assert not [c for c in text if unicodedata.category(c) in {"Cc", "Cf"} and c != "\n"]
        await pilot.press("enter")
        assert isinstance(pilot.app.screen, DetailScreen)
        detail = str(pilot.app.screen.query_one("#review-detail", Static).render())
        assert "⟨U+202E RLO⟩" in detail and "\x1b" not in detail and "\u202e" not in detail
        assert "facts (as sent)" in detail and "person (dialog)" in detail and "request bytes" in detail


async def test_filter_box_terms_and_free_text(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3")
    store.insert_rows(rows(300))
    async with Host(store).run_test(size=(120, 30)) as pilot:
        await pilot.press("slash", "a")
        box = pilot.app.screen.query_one("#review-filter", Input)
        assert box.has_focus
        box.value = "agent:Plan verdict:denied"
        await pilot.press("enter")
        listing = pilot.app.screen.query_one(HistoryList)
        assert len(listing.ids) == 25  # i % 12 == 0
        box.value = "ls 29"
        await wait_for(pilot, lambda: len(listing.ids) == 11)  # debounced: 29, 290..299


async def test_suggestion_is_written_only_after_the_confirm_step(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    rules_file = tmp_path / "rules.json"
    rules_file.write_text('{"yoloMode": false}')
    rules = PolicyStore(agent_dir, None, rules_file, home="/home/me")
    store = HistoryStore(tmp_path / "h.sqlite3")
    approvals = rows(8, value="git status", pattern="git status *")
    store.insert_rows([r for r in approvals if r["verdict"] == "approved"])
    async with Host(store, rules).run_test(size=(140, 40)) as pilot:
        await pilot.press("s")
        assert isinstance(pilot.app.screen, SuggestionsScreen)
        await pilot.press("enter")
        assert isinstance(pilot.app.screen, ConfirmRuleScreen)
        shown = str(pilot.app.screen.query_one("#review-rule", Static).render())
        # `y` approved the value, never the child's `git status *` (issue 20 finding 7): the value is offered.
        assert '"git status": "allow"' in shown and str(rules_file) in shown and "+++" in shown
        assert json.loads(rules_file.read_text()) == {"yoloMode": False}
        await pilot.press("y")
        await pilot.pause()
        assert not isinstance(pilot.app.screen, ConfirmRuleScreen)
    assert json.loads(rules_file.read_text()) == {
        "yoloMode": False,
        "permission": {"bash": {"git status": "allow"}},
    }


async def test_a_summary_that_arrives_after_the_screen_closed_is_dropped(tmp_path: Path) -> None:
    """The summary is read while the screen is open and held (by the reader the store hands the
    screen) until the screen has closed; then it is delivered as the worker delivers it, on the loop.
    Nothing raises: a `query_one` for the summary box raised NoMatches there (a flake under load took
    the app down)."""
    release, read = threading.Event(), list[Summary]()

    class HeldReader(HistoryReader):
        def summary(self, where: HistoryFilter | None = None) -> Summary:
            read.append(super().summary(where))
            release.wait(30)  # a hang guard
            return read[0]

    class HeldStore(HistoryStore):
        def reader(self) -> HistoryReader:
            return HeldReader.read_only(self.path)

    store = HeldStore(tmp_path / "h.sqlite3")
    store.insert_rows(rows(3))

    class Closing(App[None]):
        def on_mount(self) -> None:
            self.push_screen(ReviewScreen(store))

    async with Closing().run_test(size=(120, 30)) as pilot:
        screen = pilot.app.screen
        assert isinstance(screen, ReviewScreen)
        await wait_for(pilot, lambda: bool(read))
        pilot.app.pop_screen()
        await wait_for(pilot, lambda: not screen.is_attached and not screen.children)
        # The worker's call, arriving now: the screen is closed (its worker cancelled on unmount, so
        # the worker's own call would raise unseen in its thread; made here, it is seen).
        screen._show_summary(screen.filter, read[0])
        release.set()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert pilot.app.is_running and pilot.app.return_code is None


async def test_the_rule_dialog_at_80x24_paints_its_keys_and_wants_the_whole_diff_seen(tmp_path: Path) -> None:
    """Issue 20 finding 8: a long file's diff at 80x24: the key line is painted below the scrolling
    diff, and `y` before the diff's end was on screen says how to see it and writes nothing."""
    from tests.tui.support import rendered_text

    agent_dir = tmp_path / "agent"
    rules_file = tmp_path / "rules.json"
    rules_file.write_text(json.dumps({"permission": {f"tool{i}": {"x": "deny"} for i in range(30)}}))
    rules = PolicyStore(agent_dir, None, rules_file, home="/home/me")
    store = HistoryStore(tmp_path / "h.sqlite3")
    store.insert_rows([r for r in rows(8, value="git status") if r["verdict"] == "approved"])
    async with Host(store, rules).run_test(size=(80, 24)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SuggestionsScreen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmRuleScreen))
        await pilot.pause()
        await pilot.pause()
        assert "cancel (nothing is written)" in rendered_text(pilot.app)  # type: ignore[arg-type]
        before = rules_file.read_text()
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(pilot.app.screen, ConfirmRuleScreen) and rules_file.read_text() == before
        assert "scroll" in rendered_text(pilot.app)  # type: ignore[arg-type]
        await pilot.press("end")
        await pilot.pause()
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert not isinstance(pilot.app.screen, ConfirmRuleScreen)
    assert json.loads(rules_file.read_text())["permission"]["bash"] == {"git status": "allow"}
