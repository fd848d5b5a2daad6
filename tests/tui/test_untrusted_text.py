"""Untrusted child text on the real rendered output (strips and segments from the running app) and
through every other output: shown literally, hidden characters as tokens, markup inert, clicks
deciding nothing, both agent names shown and flagged when they differ."""

from __future__ import annotations

import json
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Footer, Static

from core.vocabulary.asks import Ask, AskKey, Judgment
from core.wire.reader import parse_request
from tests.hostile import hostile
from tests.tui.support import (
    SERVED,
    make_rig,
    read_response,
    rendered_strips,
    rendered_text,
    request_body,
    settle,
    wait_for,
    wait_rows,
    write_request,
)
from tui.app import AuthorizerApp
from tui.sanitize import has_hidden, sanitize, token_for
from tui.screens.ask_steps import ExpandScreen
from tui.widgets.ask_detail import AskDetail
from tui.widgets.asks_table import AsksTable

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed check

FORBIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn", "Co"})
NASTY = [
    "\x1b[31mRED", "\x1b]0;PWNED\x07 end", "safe\rEVIL", "\x00", "\x9b2J", "\u202eevil\u202c",
    "\u2066x\u2069", "a\u200bb", "\ufeff", "soft\xadhyphen", "line\u2028sep", "para\u2029sep",
    "\x7f", "\x85", "\ud800", "\U000e0041", "\ufe0f", "\u3164", "\xa0", "\x08\x0b\x0c",
]


def forbidden_in(strips: list[Strip]) -> list[str]:
    found = []
    for strip in strips:
        for segment in strip:
            for char in segment.text:
                if unicodedata.category(char) in FORBIDDEN:
                    found.append(f"U+{ord(char):04X}")
    return found


def click_metas(strips: list[Strip]) -> list[object]:
    metas: list[object] = []
    for strip in strips:
        for segment in strip:
            style = segment.style
            if style is not None and style.meta and any(k.startswith("@") for k in style.meta):
                metas.append(style.meta)
    return metas


def test_tokens_for_known_controls() -> None:
    assert token_for("\x1b") == "␛"
    assert token_for("\u202e") == "⟨U+202E RLO⟩"
    assert token_for("\x00") == "⟨U+0000 NUL⟩"
    assert token_for("\x9b") == "⟨U+009B CSI⟩"
    assert token_for("\u200b") == "⟨U+200B ZWSP⟩"
    assert token_for("\ufeff") == "⟨U+FEFF BOM⟩"
    cleaned = sanitize("a\tb\nc\x1b[0m")
    assert cleaned.plain == "a\tb\nc␛[0m" and cleaned.hidden
    assert not sanitize("plain [b]markup[/b] text\n\tindented").hidden
    assert sanitize("x\ny\tz", single_line=True).plain == "x⏎y⇥z"


@given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(list("".join(NASTY))))))
def test_sanitized_text_never_holds_a_hidden_code_point(value: str) -> None:
    cleaned = sanitize(value)
    assert not any(unicodedata.category(c) in FORBIDDEN - {"Cc"} for c in cleaned.plain)
    assert all(c in "\n\t" for c in cleaned.plain if unicodedata.category(c) == "Cc")
    assert cleaned.hidden == has_hidden([value])
    single = sanitize(value, single_line=True).plain
    assert not any(unicodedata.category(c) in FORBIDDEN for c in single)


async def test_hostile_request_renders_tokens_and_no_control_code_points(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    nasty = "".join(NASTY)
    body = request_body("req-nasty", value=f"rm {nasty}", agent=f"Ex\x1b[2Jplore{nasty[:20]}",
                        message=f"msg {nasty}")
    body["accessIntent"]["requesterCwd"] = f"/w/{nasty}"
    body["sessionApproval"] = {"grants": [{"surface": "bash", "pattern": f"rm {nasty}*"}]}
    # Lone surrogates can only arrive as JSON escapes; json.dumps keeps them escaped.
    raw = json.dumps(body, ensure_ascii=True)
    folder = rig.root / "sessions" / SERVED / "requests"
    folder.mkdir(parents=True)
    (rig.root / "sessions" / SERVED / "responses").mkdir()
    (folder / ".req-nasty.tmp").write_text(raw)
    (folder / ".req-nasty.tmp").rename(folder / "req-nasty.json")
    async with rig.app.run_test(size=(140, 60)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await settle(pilot)
        strips = rendered_strips(rig.app)
        assert forbidden_in(strips) == []
        text = rendered_text(rig.app)
        assert "␛[31mRED" in text
        assert "⟨U+202E RLO⟩" in text
        assert "⟨U+D800⟩" in text
        assert "CONTAINS HIDDEN CHARACTERS" in text
        assert "SUSPICIOUS AGENT NAME" in text
        for widget in [*rig.app.screen.query(Static), rig.app.queue.table]:
            region = Region(0, 0, max(1, widget.size.width), max(1, widget.size.height))
            assert forbidden_in(widget.render_lines(region)) == []


async def test_property_no_hidden_code_point_reaches_any_rendered_segment(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, sessions=())
    async with rig.app.run_test(size=(120, 50)) as pilot:
        await settle(pilot)
        detail = rig.app.queue.query_one(AskDetail)
        table = rig.app.queue.query_one(AsksTable)
        counter = iter(range(10**6))

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(list("".join(NASTY)))),
                       min_size=1, max_size=40))
        def check(value: str) -> None:
            n = next(counter)
            body = request_body(f"p-{n}", value=value, agent=value, message=value)
            body["accessIntent"]["requesterCwd"] = value
            body["sessionApproval"] = {"grants": [{"surface": "bash", "pattern": value}]}
            parsed = parse_request(json.dumps(body).encode())
            ask = Ask(key=AskKey(SERVED, f"p-{n}.json"), parsed=parsed,
                      judgment=Judgment("ask", explanation=(value,)), arrived_at=time.time(),
                      timeout_ms=600_000, responder_session_id=SERVED)
            detail.show(ask, time.time(), 1, 1)
            table.sync([ask], time.time())
            for widget in [*detail.query(Static), table]:
                region = Region(0, 0, max(20, widget.size.width), max(12, widget.size.height))
                leaked = forbidden_in(widget.render_lines(region))
                assert leaked == [], (repr(value), leaked)

        check()


async def test_markup_in_child_text_is_shown_literally(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    hostile = "[@click=app.quit]x[/]"
    write_request(rig.root, request_body("req-mk", value=hostile, agent="[b]Boss[/b]", message=hostile))
    # tall enough for the whole ask, the rules' explanation with it: no scrollbar (its own `@mouse` meta)
    async with rig.app.run_test(size=(120, 60)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await settle(pilot)
        text = rendered_text(rig.app)
        assert hostile in text
        assert "[b]Boss[/b]" in text
        assert click_metas(rendered_strips(rig.app)) == []


async def test_clicking_child_text_never_decides(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    hostile = "[@click=screen.action_approve]APPROVE[/]"
    write_request(rig.root, request_body("req-ck", value=hostile, message=hostile))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await settle(pilot)
        footer_text = "".join(seg.text for strip in rig.app.screen.query_one(Footer).render_lines(
            Region(0, 0, 120, 1)) for seg in strip)
        assert "Approve" not in footer_text  # decision keys are not clickable footer keys
        # Wherever the child's text is on screen (table row, facts, grant, display), and each panel.
        lines = rendered_text(rig.app).split("\n")
        spots = [(line.index("APPROVE", start) + 2, y) for y, line in enumerate(lines)
                 for start in range(len(line)) if line.startswith("APPROVE", start)]
        assert len(spots) >= 4
        for x, y in spots:
            await pilot.click(offset=(x, y), times=1)
            await pilot.click(offset=(x, y), times=2)
        for selector in ["#asks", "#facts", "#display", "#grants", "#legend", "#detail-header"]:
            await pilot.click(rig.app.queue.query_one(selector), times=2)
        assert rig.app.screen is rig.app.queue
        await settle(pilot)
        assert read_response(rig.root, "req-ck") is None
        assert len(rig.person.pending()) == 1
        assert rig.app.is_running


async def test_enter_expands_a_long_value(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    long_value = "echo " + "abcdefghij" * 200 + " END-OF-VALUE"
    write_request(rig.root, request_body("req-long", value=long_value))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        text = str(rig.app.queue.query_one("#facts", Static).render())
        assert "more characters (enter: see all)" in text
        assert "END-OF-VALUE" not in text
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, ExpandScreen))
        full = "\n".join(str(w.render()) for w in rig.app.screen.query(Static))
        assert "END-OF-VALUE" in full
        await pilot.press("escape")
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        assert read_response(rig.root, "req-long") is None


async def test_no_facts_banner_for_a_20_7_3_child(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-old", facts=False))
    async with rig.app.run_test(size=(120, 50)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await settle(pilot)
        text = rendered_text(rig.app)
        assert "NO CHILD-FIXED FACTS" in text
        assert "could not be matched against this node's rules" in " ".join(text.split())
        assert 'bash  "git push *"' in text  # the legacy {surface, patterns} suggestion, as recorded
        assert "Child's rendering" in text


async def test_suspicious_agent_names_are_flagged(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-ag", agent="../../etc/evil"))
    async with rig.app.run_test(size=(120, 50)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await settle(pilot)
        text = rendered_text(rig.app)
        assert "SUSPICIOUS AGENT NAME" in text
        assert "unauthenticated" in text


def _unused(app: AuthorizerApp) -> None:  # keeps the import used for type checkers
    del app


def leaked(app: AuthorizerApp) -> list[str]:
    """Hidden code points in what the compositor would send for the current screen (toasts included)."""
    return [
        f"U+{ord(c):04X}"
        for strip in rendered_strips(app)
        for segment in strip
        for c in segment.text
        if unicodedata.category(c) in FORBIDDEN
    ]


def put(folder: Path, name: str, body: dict[str, object]) -> Path:
    """As a child writes it (temp, then rename); lone surrogates stay JSON escapes."""
    temp = folder / f".{name}.tmp"
    temp.write_text(json.dumps(body, ensure_ascii=True))
    target = folder / name
    temp.rename(target)
    return target


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile)
def test_hostile_text_reaches_no_screen_toast_or_status_raw(tmp_path_factory: pytest.TempPathFactory,
                                                            text: str) -> None:
    import asyncio

    asyncio.run(walk(tmp_path_factory.mktemp("hostile"), f"\x1b[31m\u202e{text}"))  # never harmless


async def walk(tmp: Path, text: str) -> None:
    rig = make_rig(tmp)
    requests = rig.root / "sessions" / SERVED / "requests"
    requests.mkdir(parents=True)
    (rig.root / "sessions" / SERVED / "responses").mkdir()
    body = request_body("hostile", value=f"rm {text}", agent=text, message=text)
    body["accessIntent"]["requesterCwd"] = text
    body["sessionApproval"] = {"grants": [{"surface": "bash", "pattern": text}]}
    async with rig.app.run_test(size=(140, 50)) as pilot:
        app = rig.app
        request = put(requests, "hostile.json", body)
        await wait_rows(pilot, app, 1)
        await settle(pilot)
        assert leaked(app) == [], "queue"
        put(requests, "unusable.json", {**body, "id": "unusable", "createdAt": text})  # its reason: a toast
        request.unlink()  # withdrawn: a toast and a line in this run's history
        await wait_rows(pilot, app, 0)
        await settle(pilot)
        assert leaked(app) == [], "after the withdrawal and the unusable file"
        app.queue.set_status(f"status {text}")  # the status line's guard, given raw text
        app.notify(f"raw {text}", title=text)  # the toast's guard, given raw text (not read back here)
        await settle(pilot)
        assert leaked(app) == [], "status line and raw toast"
        for action in ("history", "sessions", "grants"):  # each screen the rig's node offers
            await app.run_action(action)
            await settle(pilot)
            assert action != "history" or app.screen is not app.queue
            assert leaked(app) == [], action
            if app.screen is not app.queue:
                app.pop_screen()
                await wait_for(pilot, lambda: app.screen is app.queue)


async def test_the_ask_detail_flags_a_requester_that_is_not_the_principal(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("mismatch", agent="Explore", extra={"requesterAgentName": "Plan"}))
    async with rig.app.run_test(size=(140, 60)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await wait_for(pilot, lambda: "requesterAgentName differs" in rendered_text(rig.app))
        text = rendered_text(rig.app)
        assert "requesterAgentName differs from principal.agentName (the rules use the principal)" in text
        assert "agentName Plan" in text and "agentName Explore" in text
