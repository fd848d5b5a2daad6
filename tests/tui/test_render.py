"""The pure renderings of an ask (`tui.render`): facts in, literal text out, no app and no widget; the
change a write or edit carries as a bounded, literal diff."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.vocabulary.asks import Ask, AskKey, Judgment
from core.wire.reader import parse_request
from tests.rules.support import ODD_NAMES, USABLE
from tests.tui.support import FIXED_CREATED, SERVED, broker_ask, request_body
from tui.render.ask import (
    Clip,
    agent_content,
    facts_content,
    grants_content,
    origin_content,
    provenance_content,
    value_content,
)
from tui.render.ask_facts import (
    age_seconds,
    ask_has_hidden,
    ask_label,
    ask_risk,
    broker_origin,
    child_values,
    duration,
    primary_value,
    risk_label,
)
from tui.render.change import MAX_LINES, FileChange, change_from_evidence, change_renderable
from tui.render.lines import batch_line, header_content, risk_content
from tui.sanitize import is_hidden
from tui.widgets.ask_columns import COLUMNS

NOW = FIXED_CREATED / 1000 + 75  # 75 s after the child asked


def make_ask(body: dict[str, Any], explanation: tuple[str, ...] = ("No rule of this node decided.",)) -> Ask:
    parsed = parse_request(json.dumps(body).encode())
    return Ask(key=AskKey(SERVED, f"{body['id']}.json"), parsed=parsed,
               judgment=Judgment("ask", explanation=explanation), arrived_at=NOW, timeout_ms=600_000,
               responder_session_id=SERVED)


def test_facts_are_shown_as_sent_and_markup_stays_literal() -> None:
    ask = make_ask(request_body("r-1", value="rm -rf [bold]x[/bold] && git push --force", agent="Explore",
                                created_at=FIXED_CREATED))
    facts = facts_content(ask, Clip(400)).plain
    assert "rm -rf [bold]x[/bold] && git push --force" in facts  # markup shown, never parsed
    assert "/worktree/issue-42" in facts and "agentName Explore" in facts
    assert [h.label for h in ask_risk(ask)] == ["rm -r", "force push"]
    assert risk_label(ask_risk(ask)) == "rm -r, force push"
    assert "Hint, not a decision" in risk_content(ask_risk(ask)).plain
    assert grants_content(ask, Clip(None)).plain == 'bash  "git push *"'
    assert provenance_content(ask, Clip(None)).plain.startswith("No rule of this node decided.")


def test_header_batch_line_and_label() -> None:
    ask = make_ask(request_body("r-2", value="npm test", agent="Builder", created_at=FIXED_CREATED))
    assert header_content(ask, NOW, 2, 7).plain == (
        "Ask 2/7 · from Builder · waiting 1m15s · child gives up in 8m45s")
    assert batch_line(3, ask, Clip(None)).plain.split("\n") == [
        "  3. Builder (unauthenticated)  bash", "       npm test"]
    assert ask_label(ask) == "Builder bash npm test"
    assert child_values(ask) == ["Builder", "bash", "npm test"] and primary_value(ask) == "npm test"
    assert age_seconds(ask, NOW) == 75.0 and duration(75) == "1m15s" and duration(3 * 3600) == "3h00m"


def test_a_cut_value_says_how_much_is_hidden() -> None:
    clip = Clip(10)
    shown = value_content("x" * 25, clip).plain
    assert shown == "x" * 10 + " … 15 more characters (enter: see all)" and clip.clipped == 1
    assert value_content("x" * 25, Clip(10), note=False).plain == "x" * 10 + "…+15"
    assert value_content(None, Clip(10)).plain == "null" and value_content("", Clip(10)).plain == "(empty)"


@pytest.mark.parametrize(("name", "reason"), ODD_NAMES.items())
def test_a_forged_agent_name_is_flagged_with_the_judgments_reason(name: str, reason: str) -> None:
    assert agent_content(name).plain.endswith(f" ⚠ suspicious agent name: {reason}")
    assert agent_content(name, short=True).plain.endswith(" ⚠ suspicious")


@pytest.mark.parametrize("name", USABLE)
def test_an_ordinary_agent_name_is_not_flagged(name: str) -> None:
    assert agent_content(name, Clip(None)).plain == f"{name} (unauthenticated)"


@settings(max_examples=80, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_property_no_hidden_code_point_in_any_rendering(value: str) -> None:
    body = request_body("p-1", value=value, agent=value, message=value, created_at=FIXED_CREATED)
    body["accessIntent"]["requesterCwd"] = value
    ask = make_ask(body, explanation=(value,))
    clip = Clip(400)
    for content in (facts_content(ask, clip), provenance_content(ask, clip), grants_content(ask, clip),
                    header_content(ask, NOW, 1, 1), batch_line(1, ask, clip), risk_content(ask_risk(ask))):
        assert not any(is_hidden(c) for c in content.plain if c != "\n"), (value, content.plain)
    assert not any(is_hidden(c) for c in ask_label(ask))
    if any(is_hidden(c) for c in value):
        assert ask_has_hidden(ask)  # and so every decision key needs a second press


@dataclass(frozen=True)
class Ev:
    label: str
    text: str
    detail: str | None = None


def test_a_write_shows_its_new_content_as_added_lines() -> None:
    change = change_from_evidence("src/a.py", [Ev("path", "src/a.py"), Ev("content", "print(1)\nprint(2)\n")])
    assert change == FileChange("src/a.py", None, ("print(1)\nprint(2)\n",))
    text = change_renderable(change)
    assert "+print(1)" in text.plain and "+print(2)" in text.plain and "--- /dev/null" in text.plain
    assert "display only, not facts" in text.plain
    styles = {str(span.style) for span in text.spans}
    assert "green" in styles


def test_an_edit_shows_old_and_new_text() -> None:
    change = change_from_evidence("a.txt", [Ev("oldText", "one\ntwo\n"), Ev("newText", "one\nTWO\n")])
    assert change is not None
    plain = change_renderable(change).plain
    assert "-two" in plain and "+TWO" in plain and " one" in plain


def test_no_content_no_change() -> None:
    assert change_from_evidence("x", [Ev("command", "git push")]) is None
    assert change_from_evidence("x", []) is None


def test_a_carried_ask_shows_its_hops_as_provenance_sanitised() -> None:
    hops = [{"host": "box-a", "sessionId": "c1", "node": "n1"},
            {"host": "[red]box-b\x1b[2J", "sessionId": "c2", "node": "n2"}]
    ask = make_ask(request_body("r-h", created_at=FIXED_CREATED) | {"hops": hops})
    origin = origin_content(ask, Clip(400))
    assert origin is not None
    assert "carried by       box-a/c1/n1 → [red]box-b␛[2J/c2/n2" in origin.plain
    assert "written by couriers, not the child" in origin.plain
    assert "via" not in origin.plain  # read from an inbox here, not taken from a broker
    # Couriers wrote the hops, not the child: never among the facts the child fixed.
    assert "carried by" not in facts_content(ask, Clip(400)).plain
    assert ask_has_hidden(ask)  # a control character in a hop needs the slower confirmation too
    assert origin_content(make_ask(request_body("r-0", created_at=FIXED_CREATED)), Clip(400)) is None


def test_a_broker_ask_says_its_broker_courier_host_and_session() -> None:
    ask = broker_ask("ci-[b]runner\u202e", "sess-9", request_body("r-b", created_at=FIXED_CREATED),
                     arrived_at=NOW)
    origin = origin_content(ask, Clip(400))
    assert origin is not None
    lines = origin.plain.split("\n")
    assert lines[:3] == ["via              the NATS broker (--broker)",
                         "courier host     ci-[b]runner⟨U+202E RLO⟩",
                         "courier session  sess-9"]
    assert header_content(ask, NOW, 1, 2).plain == (
        "Ask 1/2 · from Explore on ci-[b]runner⟨U+202E RLO⟩ · waiting 1m15s · child gives up in 8m45s")
    assert ask_label(ask) == "Explore bash git push origin main (from ci-[b]runner⟨U+202E RLO⟩)"
    # A hop list whose last hop is not the ask's broker origin is not read as one.
    local = make_ask(request_body("r-l", created_at=FIXED_CREATED)
                     | {"hops": [{"host": "h", "sessionId": "s", "node": "n"}]})
    assert broker_origin(local) is None and broker_origin(ask) is not None
    assert "from" not in ask_label(local)


@pytest.mark.parametrize(("host", "width", "cell"), [
    ("host-a", 40, "host-a/demo-host-a"),
    ("host-a", 12, "host-a/d…+10"),   # cut in the session: the host stays whole
    ("host-a", 8, "host-a/…"),        # a narrow column: the host and a mark, the detail has the rest
    ("ci-runner-17", 8, "ci-runn…"),  # a host longer than the column: as much of it as fits
])
def test_a_broker_asks_session_cell_keeps_its_host_first(host: str, width: int, cell: str) -> None:
    ask = broker_ask(host, "demo-host-a", request_body("r-c", created_at=FIXED_CREATED), arrived_at=NOW)
    column = next(c for c in COLUMNS if c.key == "session")
    assert column.fitted is not None
    shown = column.fitted(ask, width)
    assert shown.plain == cell and shown.cell_len <= width


def test_child_text_is_literal_and_hidden_characters_are_tokens() -> None:
    hostile = "[bold red]x[/] \x1b]0;pwn\x07 \u202eevil"
    change = change_from_evidence("p\x1b[2J", [Ev("content", hostile)])
    assert change is not None
    plain = change_renderable(change).plain
    assert "[bold red]x[/]" in plain  # markup shown, not interpreted
    assert "\x1b" not in plain and "\u202e" not in plain and "\x07" not in plain
    assert "␛" in plain and "⟨U+202E RLO⟩" in plain


def test_work_and_output_are_bounded() -> None:
    huge = "\n".join(f"line {i}" for i in range(MAX_LINES * 3))
    change = change_from_evidence("big", [Ev("content", huge), Ev("content", "y" * 5000)])
    assert change is not None
    plain = change_renderable(change).plain
    assert f"… {MAX_LINES * 2} more lines not shown" in plain
    assert plain.count("\n") <= MAX_LINES + 10


def test_a_grant_row_shows_its_pattern_as_written_and_as_it_acts() -> None:
    """Issue 20 finding 6 on the grants screen (`W`)."""
    from pathlib import Path

    from core.judging.grant_log import GrantEntry
    from tui.screens.grants import grant_cells

    entry = GrantEntry(session_id="s", grant_id="g1", surface="read", pattern="~/x/../../*",
                       agent_scope="all agents", made_at=0.0, made_by="person", asked_by="Explore", decided=0)
    cell = grant_cells(entry)[1].plain
    assert cell.startswith("~/x/../../*") and f"acts as {Path.home().parent}/*" in cell
