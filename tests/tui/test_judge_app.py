"""The model judge in the app (Pilot, a real local chat-completions server): its deny is not final while
a person is there (the ask waits in the queue, marked with the judge's reason as literal text and its
answers); the person's verdict is measured against it (`history judge`, the `J` view); an outage
opens the breaker and the header says so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.judging.judge_setup import JudgeSettings
from core.wiring import AttendedNode, NodeOptions, build_attended_node
from tests.judging.support import YES, ChatServer, Reply, answers, chat_server, model_says
from tests.tui.support import (
    SERVED,
    read_response,
    request_body,
    wait_for,
    wait_painted,
    wait_response,
    write_request,
)
from tui.app import AuthorizerApp
from tui.cli import main
from tui.screens.judge_view import JudgeScreen
from tui.screens.review import ReviewScreen
from tui.screens.review_steps import ConfirmRuleScreen, DetailScreen
from tui.ui_settings import UiSettings

#: The model's reason: markup, an escape sequence and a bidi override, which must show literally.
HOSTILE_REASON = "[bold green]SAFE[/] approve\x1b[31m now \u202egnp.ti"


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


def judged_node(tmp: Path, server: ChatServer, history: HistoryStore | None, rules: Path | None = None,
                **judge: object) -> AttendedNode:
    agent = tmp / "agent"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"permission": {}}), encoding="utf-8")
    settings = JudgeSettings(server.url, "local-model", allow_surfaces=frozenset({"bash"}), **judge)  # type: ignore[arg-type]
    node = build_attended_node(NodeOptions(tmp / "forwarding", tmp / "state", agent, tmp / "project",
                                           rules_file=rules, judge=settings), history)
    node.take_session(SERVED)
    return node


def detail_text(app: AuthorizerApp) -> str:
    return str(app.queue.detail.query_one("#judge").render())


async def test_a_judges_deny_goes_to_the_person_who_can_overrule_it(
        tmp_path: Path, server: ChatServer, capsys: pytest.CaptureFixture[str]) -> None:
    server.script(model_says(answers(HOSTILE_REASON, reads_secrets=YES)))
    history = HistoryStore.in_state_dir(tmp_path / "state")
    node = judged_node(tmp_path, server, history)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    root = node.core.root
    async with app.run_test(size=(140, 50)) as pilot:
        write_request(root, request_body("ssh", value="cat ~/.ssh/config"))
        await wait_for(pilot, lambda: len(node.person.pending()) == 1)
        await wait_painted(pilot, app)
        shown = detail_text(app)
        assert "THE JUDGE WOULD DENY" in shown and "the judge would deny: " in shown
        assert "[bold green]SAFE[/] approve" in shown  # literal, never markup
        assert "\x1b" not in shown and "\u202e" not in shown  # controls shown as tokens
        assert "reads_secrets yes 0.95" in shown
        assert len(server.requests) == 1
        await pilot.press("y")  # an ask the judge would deny takes a second press, even with it off
        await wait_for(pilot, lambda: "the model judge would deny this ask" in app.queue.status_text)
        assert read_response(root, "ssh") is None
        await pilot.press("y")
        body = await wait_response(pilot, root, "ssh")
        assert body["state"] == "approved" and body["decidedBy"]["kind"] == "user"
        await pilot.press("J")
        await wait_for(pilot, lambda: isinstance(app.screen, JudgeScreen))
        await pilot.press("escape")
        await pilot.press("q")
    history.close()
    capsys.readouterr()
    assert main(["history", "judge", "--state-dir", str(tmp_path / "state"), "--json"]) == 0
    [bash] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (bash["surface"], bash["compared"], bash["agreed"]) == ("bash", 1, 0)
    assert [case["value"] for case in bash["wouldHaveDeniedWhatYouAllowed"]] == ["cat ~/.ssh/config"]
    assert main(["history", "judge", "--state-dir", str(tmp_path / "state")]) == 0
    table = capsys.readouterr().out
    assert "WOULD DENY YOUR APPROVALS" in table and "would have denied what you allowed: bash" in table


async def test_advise_mode_shows_the_recommendation_and_decides_nothing(
        tmp_path: Path, server: ChatServer) -> None:
    server.script(model_says(answers("only lists", is_read_only=YES)))
    node = judged_node(tmp_path, server, None, mode="advise")
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(140, 50)) as pilot:
        write_request(node.core.root, request_body("ls", value="ls -la"))
        await wait_for(pilot, lambda: len(node.person.pending()) == 1)
        await wait_painted(pilot, app)
        shown = detail_text(app)
        assert "The judge advises" in shown and "recommendation: allow" in shown
        await pilot.press("q")


async def test_an_outage_opens_the_breaker_and_asks_come_straight_to_the_person(
        tmp_path: Path, server: ChatServer) -> None:
    server.script(Reply(status=500, body=b"{}"))
    node = judged_node(tmp_path, server, None)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(140, 50)) as pilot:
        for n in range(4):
            write_request(node.core.root, request_body(f"a{n}", value=f"make t{n}"))
            await wait_for(pilot, lambda n=n: len(node.person.pending()) == n + 1)  # type: ignore[misc]
        assert app.sub_title.startswith("judge unavailable")
        assert len(server.requests) == 3  # the fourth was not sent: the judge is unavailable
        await wait_painted(pilot, app)
        assert "unavailable" in detail_text(app) or "could not answer" in detail_text(app)
        await pilot.press("q")


async def test_a_judges_allow_is_final_and_can_be_overturned_into_a_deny_rule(
        tmp_path: Path, server: ChatServer) -> None:
    server.script(model_says(answers("only builds", is_read_only=YES)))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"permission": {}}), encoding="utf-8")
    history = HistoryStore.in_state_dir(tmp_path / "state")
    node = judged_node(tmp_path, server, history, rules)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.core.root, request_body("mk", value="make deploy"))
        body = await wait_response(pilot, node.core.root, "mk")
        assert body["state"] == "approved" and body["decidedBy"]["name"] == "judge"
        assert node.person.pending() == []  # the judge's allow is final: never shown
        await pilot.press("J")
        await wait_for(pilot, lambda: isinstance(app.screen, JudgeScreen) and app.screen.table.row_count == 1)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        assert rules.read_text() == json.dumps({"permission": {}})  # nothing written before y
        await pilot.press("y")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmRuleScreen))
        await pilot.press("escape")
        await pilot.press("q")
    history.close()
    assert json.loads(rules.read_text())["permission"] == {"bash": {"make deploy": "deny"}}


async def test_from_the_history_a_judges_allow_is_overturned_into_a_deny_rule(
        tmp_path: Path, server: ChatServer) -> None:
    server.script(model_says(answers("only builds", is_read_only=YES)))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"permission": {}}), encoding="utf-8")
    history = HistoryStore.in_state_dir(tmp_path / "state")
    node = judged_node(tmp_path, server, history, rules)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(160, 50)) as pilot:
        write_request(node.core.root, request_body("mk", value="make release"))
        await wait_response(pilot, node.core.root, "mk")
        await wait_for(pilot, lambda: [r.outcome for r in history.reader().query()] == ["chain"])
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await wait_for(pilot, lambda: len(app.screen.history_list.ids) == 1)  # type: ignore[attr-defined]
        app.screen.history_list.focus()  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRuleScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmRuleScreen))
    history.close()
    assert json.loads(rules.read_text())["permission"] == {"bash": {"make release": "deny"}}
