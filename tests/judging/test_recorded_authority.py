"""Recorded authority inside the serving loop: real config files, real request files, real answers."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.judging.links import AuthorizerChain, CommandLink
from core.judging.recorded import LinkChain, RecordedAuthority
from core.person import DecisionRefused, Person
from core.rules import GrantRefused, PolicyStore
from core.serving import ServingCore
from core.testing import GatedGrantBook
from core.vocabulary.asks import Arbiter, AskKey, LeavingArbiter
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from tests.helpers import read_response_when_written, response_path, wait_for, write_request

S = "serving-session"


def intent(surface: str, *values: str, agent: str = "Explore", **extra: Any) -> dict[str, Any]:
    return {"surface": surface, "matchValues": list(values), "boundaryValue": None,
            "requesterCwd": "/worktree/issue-42", "principal": {"sessionId": "child", "agentName": agent},
            **extra}


class Node:
    def __init__(self, tmp_path: Path, config: dict[str, Any]) -> None:
        self.root = tmp_path / "root"
        self.agent_dir = tmp_path / "agent"
        self.config_path = self.agent_dir / "extensions" / "pi-permission-system" / "config.json"
        self.config_path.parent.mkdir(parents=True)
        self.config_path.write_text(json.dumps(config))
        self.store = PolicyStore(self.agent_dir, tmp_path / "project", None, home="/home/me")
        self.authority = RecordedAuthority(self.store)
        self.events: list[ServeEvent] = []
        self.tmp_path = tmp_path

    async def start(self, arbiter: Arbiter, chain: LinkChain | None = None) -> ServingCore:
        core = ServingCore(self.root, self.tmp_path / "state", arbiter, judge=self.authority, chain=chain)
        core.add_background(self.authority.watch_config)
        core.subscribe(self.events.append)
        core.add_session(S)
        self.task = asyncio.create_task(core.run())
        self.core = core
        await asyncio.sleep(0)  # let it start; its first scan serves whatever is already there
        return core

    async def stop(self) -> None:
        self.core.stop()
        await asyncio.wait_for(self.task, 5)


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    n = Node(tmp_path, {"permission": {
        "bash": {"git *": "allow", "git push *": {"action": "deny", "reason": "use the staging remote"},
                 "rm *": "deny"},
        "path_read": {"src/*": "allow"},
    }})
    yield n
    if hasattr(n, "task"):
        await n.stop()


async def test_allow_and_deny_by_rule_are_answered_at_once(node: Node) -> None:
    await node.start(LeavingArbiter())
    write_request(node.root, S, "ok", accessIntent=intent("bash", "git status"))
    write_request(node.root, S, "no", accessIntent=intent("bash", "git push origin main"))
    ok = await read_response_when_written(node.root, S, "ok")
    assert ok["state"] == "approved"
    assert ok["decidedBy"] == {"kind": "rule", "surface": "bash", "pattern": "git *", "origin": "global"}
    no = await read_response_when_written(node.root, S, "no")
    assert no["state"] == "denied_with_reason" and no["denialReason"] == "use the staging remote"
    assert no["decidedBy"] == {"kind": "rule", "surface": "bash", "pattern": "git push *", "origin": "global"}


async def test_relative_rule_covers_a_child_in_another_worktree(node: Node) -> None:
    await node.start(LeavingArbiter())
    write_request(node.root, S, "wt", accessIntent=intent(
        "path_read", "/worktree/issue-42/src/foo.ts", "src/foo.ts"))
    assert (await read_response_when_written(node.root, S, "wt"))["state"] == "approved"


async def test_no_facts_goes_to_the_person_even_when_the_display_value_matches(node: Node) -> None:
    person = Person(node.authority)
    await node.start(person)
    write_request(node.root, S, "legacy", surface="bash", value="git status")
    await wait_for(lambda: len(person.pending()) == 1, what="the legacy ask pending")
    ask = person.pending()[0]
    assert not ask.has_facts and ask.judgment.verdict == "ask"
    assert "no child-fixed facts" in ask.judgment.explanation[0]
    assert not response_path(node.root, S, "legacy").exists()


async def test_malformed_intent_is_named_in_the_explanation(node: Node) -> None:
    person = Person(node.authority)
    await node.start(person)
    write_request(node.root, S, "bad", accessIntent={**intent("bash", "git status"), "matchValues": "git"})
    await wait_for(lambda: len(person.pending()) == 1, what="pending")
    assert any("malformed and dropped whole" in line for line in person.pending()[0].judgment.explanation)


async def test_default_ask_is_explained(node: Node) -> None:
    person = Person(node.authority)
    await node.start(person)
    write_request(node.root, S, "npm", accessIntent=intent("bash", "npm install"))
    await wait_for(lambda: len(person.pending()) == 1, what="pending")
    assert person.pending()[0].judgment.explanation[0] == "No rule of this node decided: the default is ask."


async def test_whole_session_grant_is_recorded_and_auto_approves_later_forwards(node: Node) -> None:
    person = Person(node.authority)
    await node.start(person)
    grants = {"grants": [{"surface": "bash", "pattern": "npm run *"}]}
    write_request(node.root, S, "first", accessIntent=intent("bash", "npm run dev"), sessionApproval=grants)
    await wait_for(lambda: len(person.pending()) == 1, what="pending")
    key = person.pending()[0].key
    assert person.serving_grant_refusal(key) is None
    await person.approve_for_serving_session(key, reach=())
    first = await read_response_when_written(node.root, S, "first")
    assert first["state"] == "approved" and first["decidedBy"] == {"kind": "user", "via": "dialog"}
    write_request(node.root, S, "later", accessIntent=intent("bash", "npm run test"))
    later = await read_response_when_written(node.root, S, "later")
    assert later["decidedBy"] == {"kind": "session_approval", "surface": "bash", "pattern": "npm run *"}
    assert [g.pattern for g in node.authority.grants_for(S).list()] == ["npm run *"]


async def test_whole_session_grant_previews_and_decides_the_other_pending_asks_it_matches(node: Node) -> None:
    person = Person(node.authority)
    await node.start(person)
    grants = {"grants": [{"surface": "bash", "pattern": "npm run *"}]}
    write_request(node.root, S, "a", accessIntent=intent("bash", "npm run dev"), sessionApproval=grants)
    write_request(node.root, S, "b", accessIntent=intent("bash", "npm run test", agent="Builder"))
    write_request(node.root, S, "c", accessIntent=intent("bash", "npm install"))
    write_request(node.root, S, "d", surface="bash", value="npm run lint")  # no facts: never matched
    write_request(node.root, S, "e", accessIntent=intent("bash", "npm run x"), targetSessionId="other")
    await wait_for(lambda: len(person.pending()) == 4, what="four pending (e is quarantined)")
    key = next(a.key for a in person.pending() if a.request.id == "a")
    reach = person.grant_reach(key)
    assert [a.request.id for a in reach] == ["b"]  # same session, facts, allowed now
    decided = await person.approve_for_serving_session(key, reach=reach)
    assert decided.kind == "approved_for_serving_session"
    b = await read_response_when_written(node.root, S, "b")
    assert b["state"] == "approved"
    assert b["decidedBy"] == {"kind": "session_approval", "surface": "bash", "pattern": "npm run *"}
    [by_grant] = decided.also
    assert by_grant.granted_on == key
    assert by_grant.kind == "approved_by_serving_grant" and by_grant.ask.request.id == "b"
    assert sorted(a.request.id for a in person.pending()) == ["c", "d"]


async def test_grant_on_an_ask_without_facts_is_refused_as_pointless(node: Node) -> None:
    person = Person(node.authority)
    await node.start(person)
    write_request(node.root, S, "old", surface="bash", value="npm run dev",
                  sessionApproval={"surface": "bash", "patterns": ["npm run *"]})
    await wait_for(lambda: len(person.pending()) == 1, what="pending")
    key = person.pending()[0].key
    refusal = person.serving_grant_refusal(key)
    assert refusal is not None and "cannot apply to asks without facts" in refusal
    with pytest.raises(GrantRefused):
        await person.approve_for_serving_session(key, reach=())
    assert node.authority.grants_for(S).list() == ()


async def test_grant_that_would_shadow_a_deny_is_refused_naming_it(node: Node) -> None:
    person = Person(node.authority)
    await node.start(person)
    grants = {"grants": [{"surface": "bash", "pattern": "git *"}]}
    write_request(node.root, S, "wide", accessIntent=intent("bash", "gitk"), sessionApproval=grants)
    await wait_for(lambda: len(person.pending()) == 1, what="pending")
    key = person.pending()[0].key
    refusal = person.serving_grant_refusal(key)
    assert refusal is not None and "git push *" in refusal
    with pytest.raises(GrantRefused):
        await person.approve_for_serving_session(key, reach=())
    assert person.get(key) is not None and not response_path(node.root, S, "wide").exists()
    assert node.authority.grants_for(S).list() == ()


async def test_subagent_session_approval_needs_a_suggestion(node: Node) -> None:
    person = Person(node.authority)
    await node.start(person)
    write_request(node.root, S, "plain", accessIntent=intent("bash", "make"))
    await wait_for(lambda: len(person.pending()) == 1, what="pending")
    with pytest.raises(DecisionRefused, match="no session suggestion"):
        await person.approve_for_requester_session(person.pending()[0].key)
    with pytest.raises(DecisionRefused, match="A reason is required"):
        await person.deny(person.pending()[0].key, reason="   ")
    await person.deny(person.pending()[0].key, reason="not now")
    body = await read_response_when_written(node.root, S, "plain")
    assert body["state"] == "denied_with_reason" and body["denialReason"] == "not now"
    with pytest.raises(DecisionRefused):
        await person.approve_once(AskKey(S, "plain.json"))


async def test_config_change_is_picked_up_while_serving(node: Node) -> None:
    await node.start(LeavingArbiter())
    write_request(node.root, S, "before", accessIntent=intent("bash", "rm -rf build"))
    before = await read_response_when_written(node.root, S, "before")
    # A rule without a reason of its own still tells the agent who denied (not "User denied").
    assert before["state"] == "denied_with_reason"
    expected = "pi-authorizer denied this by its bash 'rm *' rule (no reason was configured)"
    assert before["denialReason"] == expected
    narrowed = {"permission": {"bash": {"git *": "allow", "git push *": {"action": "deny", "reason": "x"},
                                        "rm *": "deny", "make *": "deny"}}}
    node.config_path.write_text(json.dumps(narrowed))  # a new deny: applied at once
    await wait_for(lambda: node.store.policy("Explore").rules[-1].pattern == "make *", what="reload")
    write_request(node.root, S, "after", accessIntent=intent("bash", "make"))
    after = await read_response_when_written(node.root, S, "after")
    assert after["state"] == "denied_with_reason" and "'make *' rule" in after["denialReason"]


async def test_a_widening_config_change_is_held_until_accepted(node: Node) -> None:
    held: list[object] = []
    node.authority.on_pending.append(held.append)
    await node.start(LeavingArbiter())
    node.config_path.write_text(json.dumps({"permission": {"bash": {"make *": "allow"}}}))
    await wait_for(lambda: len(held) == 1, what="the widening reload held")
    write_request(node.root, S, "held", accessIntent=intent("bash", "rm -rf build"))
    held_body = await read_response_when_written(node.root, S, "held")
    assert "'rm *' rule" in held_body["denialReason"]  # the old rules decided
    [pending] = node.store.pending()
    assert "+ bash 'make *': allow  (widens)" in pending.diff_lines()
    assert "- bash 'rm *': deny  (widens)" in pending.diff_lines()
    assert node.authority.accept(pending)
    write_request(node.root, S, "after", accessIntent=intent("bash", "make"))
    assert (await read_response_when_written(node.root, S, "after"))["state"] == "approved"


async def test_invalid_config_never_grants_and_never_crashes(tmp_path: Path) -> None:
    node = Node(tmp_path, {})
    node.config_path.write_text("{ not json")
    project = tmp_path / "project" / ".pi" / "extensions" / "pi-permission-system"
    project.mkdir(parents=True)
    (project / "config.json").write_text(json.dumps({"permission": {"bash": "allow"}, "bogus": 1}))
    node.authority.reload()  # what the config watcher does on the change (invalid files never widen)
    assert node.store.pending() == ()
    person = Person(node.authority)
    await node.start(person)
    try:
        write_request(node.root, S, "x", accessIntent=intent("bash", "anything"))
        await wait_for(lambda: len(person.pending()) == 1, what="pending")
        lines = person.pending()[0].judgment.explanation
        assert any(line.startswith("config error:") and "bogus" in line for line in lines)
    finally:
        await node.stop()


async def test_a_chain_link_decides_after_the_rules(node: Node, tmp_path: Path) -> None:
    script = tmp_path / "link.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        facts = json.load(sys.stdin)
        assert "requesterCwd" not in facts and "principal" not in facts
        verdict = "deny" if facts["matchValues"][0].startswith("curl") else "defer"
        print(json.dumps({"verdict": verdict, "reason": "no network from agents"}))
    """))
    person = Person(node.authority)
    link = CommandLink("netguard", (sys.executable, str(script)), timeout_s=20)
    await node.start(person, chain=LinkChain(AuthorizerChain([link])))
    write_request(node.root, S, "curl", accessIntent=intent("bash", "curl example.com"))
    write_request(node.root, S, "make", accessIntent=intent("bash", "make"))
    body = await read_response_when_written(node.root, S, "curl")
    assert body["state"] == "denied_with_reason" and body["denialReason"] == "no network from agents"
    assert body["decidedBy"] == {"kind": "authorizer", "name": "netguard", "verdict": "deny",
                                 "reason": "no network from agents"}
    await wait_for(lambda: len(person.pending()) == 1, within=20, what="the deferred ask reaches the person")
    assert person.pending()[0].key.name == "make.json"


async def test_grant_for_one_agent_is_refused_when_another_agents_rules_deny(node: Node) -> None:
    reviewer = node.tmp_path / "project" / ".pi" / "agents" / "Reviewer.md"
    reviewer.parent.mkdir(parents=True)
    reviewer.write_text('---\npermission:\n  bash:\n    "npm publish *": deny\n---\n')
    person = Person(node.authority)
    await node.start(person)
    grants = {"grants": [{"surface": "bash", "pattern": "npm *"}]}
    write_request(node.root, S, "a", accessIntent=intent("bash", "npm ci"), sessionApproval=grants)
    await wait_for(lambda: len(person.pending()) == 1, what="pending")
    key = person.pending()[0].key
    refusal = person.serving_grant_refusal(key)
    assert refusal is not None and "'Reviewer'" in refusal and "npm publish *" in refusal
    with pytest.raises(GrantRefused):
        await person.approve_for_serving_session(key, reach=())
    assert node.authority.grants_for(S).list() == ()


def test_judge_once_builds_no_trail_and_decided_by_is_the_wire_type(tmp_path: Path) -> None:
    from core.vocabulary.asks import LazySequence
    from core.wire.decisions import RuleDecision
    from core.wire.reader import parse_request

    node = Node(tmp_path, {"permission": {"bash": {"git *": "allow"}}})
    body = {"id": "r", "createdAt": 1, "requesterSessionId": "child", "requesterAgentName": "Explore",
            "targetSessionId": S, "message": "m", "accessIntent": intent("bash", "git status")}
    judgment = node.authority.judge(parse_request(json.dumps(body).encode()), S)
    assert judgment.verdict == "allow"
    assert judgment.decided_by == RuleDecision(surface="bash", pattern="git *", origin="global")
    assert isinstance(judgment.explanation, LazySequence) and not judgment.explanation.built
    assert isinstance(judgment.trail, LazySequence) and not judgment.trail.built
    assert any("evaluate bash" in line for line in judgment.explanation)  # built when read
    assert judgment.trail[-1]["step"] == "verdict"


def test_an_ask_said_by_a_rule_names_that_rule(tmp_path: Path) -> None:
    """An ask has no `decidedBy`; the explanation still names the rule that said ask."""
    node = Node(tmp_path, {"permission": {"bash": {"*": "allow", "npm *": "ask"}}})
    request = {"id": "r", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
               "requesterAgentName": "Explore", "accessIntent": intent("bash", "npm install")}
    judgment = node.authority.judge(parse_request(json.dumps(request).encode()), S)
    assert judgment.verdict == "ask" and judgment.decided_by is None
    assert judgment.explanation[0] == "This node's rule 'npm *' (global layer) says ask."


async def test_serving_goes_on_while_a_grant_check_runs_over_many_agent_files(tmp_path: Path) -> None:
    """Issue 21 finding 6: with thousands of agent files a whole-session grant's deny check composes a
    policy per agent file (seconds); it runs off the event loop, so asks keep being answered by rule
    while it runs, and the check then gives the real answer."""
    node = Node(tmp_path, {"permission": {"bash": {"git *": "allow"}}})
    agents = node.agent_dir / "agents"
    agents.mkdir()
    for n in range(200):
        (agents / f"agent{n}.md").write_text(f"---\nname: agent{n}\n---\n")
    careful = '---\nname: careful\npermission:\n  bash:\n    "npm run *": deny\n---\n'
    (agents / "careful.md").write_text(careful)
    book = GatedGrantBook(node.authority)
    person = Person(book)
    await node.start(person)
    try:
        write_request(node.root, S, "grant", accessIntent=intent("bash", "npm run dev"),
                      sessionApproval={"surface": "bash", "patterns": ["npm run *"]})
        await wait_for(lambda: len(person.pending()) == 1, what="the ask pending")
        check = asyncio.create_task(person.check_serving_grant(person.pending()[0].key))
        await asyncio.to_thread(book.entered.wait, 30)
        for n in range(5):  # the control asks: answered while the check is held
            write_request(node.root, S, f"control{n}", accessIntent=intent("bash", "git status"))
            assert (await read_response_when_written(node.root, S, f"control{n}"))["state"] == "approved"
        assert not check.done() and book.on_loop_thread is False
        book.gate.set()
        refusal = await check
        assert refusal is not None and "careful" in refusal  # the real check: agent careful's deny
    finally:
        book.gate.set()
        await node.stop()


async def test_whole_session_grant_decides_exactly_the_asks_its_confirmation_listed(node: Node) -> None:
    """Never re-derived at commit: an ask that arrived after the confirmation was painted, or one
    rewritten under a listed name, waits for the person (issue 20)."""
    person = Person(node.authority)
    await node.start(person)
    grants = {"grants": [{"surface": "bash", "pattern": "npm run *"}]}
    write_request(node.root, S, "a", accessIntent=intent("bash", "npm run dev"), sessionApproval=grants)
    write_request(node.root, S, "b", accessIntent=intent("bash", "npm run test"))
    write_request(node.root, S, "c", accessIntent=intent("bash", "npm run lint"))
    await wait_for(lambda: len(person.pending()) == 3, what="three pending")
    key = next(a.key for a in person.pending() if a.request.id == "a")
    reach = person.grant_reach(key)  # what the confirmation listed
    assert sorted(a.request.id for a in reach) == ["b", "c"]
    # After the paint: c is rewritten under its id, d arrives; both would match the grant.
    old_c = next(a for a in reach if a.request.id == "c")
    response_path(node.root, S, "c").parent.parent.joinpath("requests", "c.json").unlink()
    await wait_for(lambda: person.get(old_c.key) is None, what="c withdrawn")
    write_request(node.root, S, "c", accessIntent=intent("bash", "npm run lint -- --fix"))
    write_request(node.root, S, "d", accessIntent=intent("bash", "npm run build"))
    await wait_for(lambda: len(person.pending()) == 4, what="the new c and d pending")
    decided = await person.approve_for_serving_session(key, reach=reach)
    assert [d.ask.request.id for d in decided.also] == ["b"]
    assert (await read_response_when_written(node.root, S, "b"))["decidedBy"]["kind"] == "session_approval"
    assert sorted(a.request.id for a in person.pending()) == ["c", "d"]
    assert not response_path(node.root, S, "c").exists() and not response_path(node.root, S, "d").exists()


async def test_a_written_rule_lists_the_asks_it_decides_and_decides_exactly_those(tmp_path: Path) -> None:
    """`R`: the dialog lists the pending asks the file's new text would decide (the ask it came from
    among them); after the write exactly those are answered, each as decided by that rule."""
    from core.history.rule_edit import apply, preview
    from core.history.suggest import suggestion_from_ask

    rules_file = tmp_path / "rules.json"
    rules_file.write_text("{}\n")
    node = Node(tmp_path, {"permission": {"bash": {"rm *": "deny"}}})
    node.store = PolicyStore(node.agent_dir, tmp_path / "project", rules_file, home="/home/me")
    node.authority = RecordedAuthority(node.store)
    person = Person(node.authority)
    await node.start(person)
    try:
        write_request(node.root, S, "a", accessIntent=intent("bash", "npm run lint"))
        write_request(node.root, S, "b", accessIntent=intent("bash", "npm run lint", agent="Builder"))
        write_request(node.root, S, "c", accessIntent=intent("bash", "npm run test"))
        await wait_for(lambda: len(person.pending()) == 3, what="three pending")
        a = next(x for x in person.pending() if x.request.id == "a")
        offer = suggestion_from_ask(node.store, "bash", ["npm run lint"], [], "Explore", 0.0)
        edit = preview(offer, rules_file, node.store)
        reach = person.rule_reach(edit.path, edit.after)
        assert sorted(x.request.id for x in reach) == ["a", "b"]  # the ask itself and b; never c
        assert json.loads(rules_file.read_text()) == {}  # a what-if: nothing written, nothing applied
        assert node.authority.judge(a.parsed, S).verdict == "ask"
        write_request(node.root, S, "d", accessIntent=intent("bash", "npm run lint"))  # after the paint
        await wait_for(lambda: len(person.pending()) == 4, what="d pending")
        apply(offer, edit.path, confirmed=edit, rules=node.store)
        decided = await person.approve_by_written_rule(reach)
        assert sorted(x.ask.request.id for x in decided) == ["a", "b"]
        assert {x.kind for x in decided} == {"approved_by_written_rule"}
        for rid in ("a", "b"):
            body = await read_response_when_written(node.root, S, rid)
            assert body["state"] == "approved" and body["decidedBy"]["kind"] == "rule"
            assert body["decidedBy"]["pattern"] == "npm run lint"
        assert sorted(x.request.id for x in person.pending()) == ["c", "d"]  # d waits for the person
    finally:
        await node.stop()
