"""Hostile child text through every headless output path, on real files and the real commands.

A child writes request files; pi-authorizer serves them (the `serve` log lines), records them (the
history the `history` command prints) and explains them (`explain`, and its error when the file is
unusable). Whatever a child put in a field, what reaches the terminal holds no raw control, bidi,
zero-width or other hidden code point, and shows the hidden ones as visible escapes.
"""

from __future__ import annotations

import asyncio
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.history import HistoryStore
from core.serving import ServingCore
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import request_body, session_dir, wait_for, write_request_bytes
from tests.hostile import ESCAPE_MARKS, hides, hostile, raw_hidden
from tui.cli import main
from tui.commands.node import configure_logging

S = "019ff969-c34c-70be-9034-fae19c852932"


def file_name(text: str) -> str:
    """`text` as a file name (no `/`, no NUL, encodable): a child chooses request file names too."""
    name = "".join(c for c in text if c not in "/\x00" and not 0xD800 <= ord(c) <= 0xDFFF)
    while len(name.encode()) > 200:
        name = name[:-1]
    return f"{name or 'x'}.json"




def hostile_request(value: str, agent: str, cwd: str) -> dict[str, object]:
    return request_body(
        "r1", S, requesterAgentName=agent, message=f"run {value}?", value=value,
        accessIntent={"surface": "bash", "matchValues": [value], "boundaryValue": value,
                      "requesterCwd": cwd, "principal": {"sessionId": "c", "agentName": agent}},
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=hostile, agent=hostile, cwd=hostile)
def test_explain_shows_every_field_escaped(
    value: str, agent: str, cwd: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rules = root / "rules.json"
        rules.write_text(json.dumps({"permission": {"bash": {value: "deny", f"{agent} *": "allow"}}}))
        request = root / file_name(value)
        request.write_text(json.dumps(hostile_request(value, agent, cwd)))
        for extra in ([], ["--json"]):
            argv = ["explain", str(request), "--project", tmp, "--agent-dir", tmp, "--rules", str(rules)]
            assert main([*argv, *extra]) == 0
            out, err = capsys.readouterr()
            assert raw_hidden(out) == [] and raw_hidden(err) == []
            if extra:
                assert out.isascii()
                assert json.loads(out)["trail"][1]["consulted"][0]["value"] == value  # exactly as sent
            else:
                if hides(agent):
                    assert any(mark in out for mark in ESCAPE_MARKS)
                if "[bold]" in agent:
                    assert "[bold]" in out  # markup is text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=hostile)
def test_explain_of_an_unusable_request_says_why_escaped(
    field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        request = Path(tmp) / file_name(field)
        request.write_text(json.dumps({**request_body("r1", S), "createdAt": field, "surface": 7}))
        assert main(["explain", str(request)]) == 2
        out, err = capsys.readouterr()
        assert raw_hidden(out) == [] and raw_hidden(err) == []
        assert "is not a usable request" in err
        if hides(request.name):
            assert any(mark in err for mark in ESCAPE_MARKS)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=st.lists(st.tuples(hostile, hostile, hostile), min_size=1, max_size=5))
@example(fields=[("", "[bold][bold]\x1b[31m", "\x1b[31m")])  # a flake once: the escape past the cut
def test_served_hostile_asks_leave_escaped_log_lines_and_history(
    fields: list[tuple[str, str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Served for real (log lines through the real sink, rows in the real history), then printed by
    `history` as a table and as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        root, state = Path(tmp) / "root", Path(tmp) / "state"
        log = io.StringIO()
        configure_logging(stream=log)
        names = asyncio.run(serve(root, state, fields))
        lines = log.getvalue()
        assert raw_hidden(lines) == []
        assert all(" request=" not in line or line.count("\n") == 0 for line in lines.splitlines())
        assert main(["history", "--state-dir", str(state), "--limit", "0"]) == 0
        table, err = capsys.readouterr()
        assert raw_hidden(table) == [] and raw_hidden(err) == []
        assert len(table.splitlines()) == 1 + len(names)  # one line per ask, whatever it holds
        if any(hides(agent) for _, agent, _ in fields):
            # shown as an escape, unless the column cut the name before it (and says so with `…+N`)
            assert any(mark in table for mark in ESCAPE_MARKS) or "…+" in table
        assert main(["history", "--state-dir", str(state), "--json"]) == 0
        out, _ = capsys.readouterr()
        assert out.isascii() and raw_hidden(out) == []


async def serve(root: Path, state: Path, fields: list[tuple[str, str, str]]) -> list[str]:
    """Serve one request per field triple (value, agent, file name) and one unusable file per triple;
    every one ends answered or quarantined."""
    store = HistoryStore.in_state_dir(state)
    core = ServingCore(root, state, DenyingArbiter(), ledger=store)
    core.subscribe(store.observe)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    names: list[str] = []
    try:
        for index, (value, agent, name) in enumerate(fields):
            body = {**hostile_request(value, agent, name), "id": f"r{index}"}
            write_request_bytes(root, S, f"r{index}.json", json.dumps(body).encode())
            bad = f"{index}{file_name(name)}"
            write_request_bytes(root, S, bad, json.dumps({**body, "createdAt": value}).encode())
            names += [f"r{index}.json", bad]
        requests = session_dir(root, S) / "requests"
        await wait_for(lambda: not any(requests.iterdir()), what="every request answered or set aside")
        await wait_for(lambda: len(store.query()) == len(names), what="every ask in the history")
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)  # a hang guard
        store.close()
    return names
