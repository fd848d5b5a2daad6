"""The courier against the real 20.7.3 package: a real child writes into session C, `pi-authorizer
serve --forward-to session:P` carries the ask, and P is served by the real 20.7.3 server (which reads
the spliced file: the hop keys, a repeated `id` and `targetSessionId`) or by a second pi-authorizer
(whose history shows the child's bytes arrived unchanged)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from core.disk.paths import encode_session_id
from tests.helpers import session_dir
from tests.interop.harness import NodeDriver, child_ask_args, child_env, serve, wait_until
from tests.interop.ids import CHILD_SESSION, ODD_SESSION, UUID_SESSION

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

C, P = UUID_SESSION, ODD_SESSION
ASK: dict[str, Any] = {
    "requestId": "toolu_01Courier",
    "source": "tool_call",
    "message": "Agent 'Explore' requested bash command 'make deploy'. Allow this command?",
    "surface": "bash",
    "value": "make deploy",
    "toolName": "bash",
}


def test_the_real_reference_server_answers_an_ask_a_courier_carried(
    node_driver: NodeDriver, forwarding_root: Path, state_dir: Path, workdir: Path
) -> None:
    with (
        node_driver.start("serve_reference.ts", [str(forwarding_root), P], workdir / "p") as reference,
        serve([C], forwarding_root, state_dir, "deny", workdir, [f"{encode_session_id(C)}.json"],
              ["--forward-to", f"session:{P}"]) as courier,
    ):
        wait_until(lambda: b"ready" in reference.stdout_path.read_bytes(), 30, "the reference server",
                   alive=reference.proc, describe=reference.stderr_text)
        args = child_ask_args(forwarding_root, CHILD_SESSION, "Explore", ASK)
        result = node_driver.run("child_ask.ts", args, env=child_env(C))
        decision = result.json_line()
        courier.wait_for_log(f"carried to session:{P}: approved")
        assert "Ignoring" not in reference.stderr_text()  # not refused as addressed elsewhere or malformed
    assert decision["approved"] is True and decision["state"] == "approved"
    with sqlite3.connect(state_dir / "history.sqlite3") as db:
        [(outcome, decider)] = db.execute("SELECT outcome, decider FROM asks").fetchall()
    assert outcome == "courier" and decider.startswith(f"carried to session:{P}")
    assert list((session_dir(forwarding_root, P) / "requests").glob("*.json")) == []


def test_the_facts_of_a_real_child_reach_the_adjudicating_node_byte_for_byte(
    node_driver: NodeDriver, forwarding_root: Path, tmp_path: Path, workdir: Path
) -> None:
    state_c, state_p = tmp_path / "state-c", tmp_path / "state-p"
    with (
        serve([P], forwarding_root, state_p, "deny", workdir, [f"{encode_session_id(P)}.json"]),
        serve([C], forwarding_root, state_c, "deny", workdir, [f"{encode_session_id(C)}.json"],
              ["--forward-to", f"session:{P}"]) as courier,
    ):
        args = child_ask_args(forwarding_root, CHILD_SESSION, "Explore", ASK)
        result = node_driver.run("child_ask.ts", args, env=child_env(C))
        decision = result.json_line()
        courier.wait_for_log(f"carried to session:{P}: denied_with_reason")
    assert decision["approved"] is False and "no person is attending" in decision["denialReason"]
    with sqlite3.connect(state_c / "history.sqlite3") as db:
        [(sent,)] = db.execute("SELECT raw FROM asks").fetchall()
    with sqlite3.connect(state_p / "history.sqlite3") as db:
        [(arrived, requester)] = db.execute("SELECT raw, requester_session FROM asks").fetchall()
    assert arrived.startswith(sent.rstrip()[:-1]) and requester == CHILD_SESSION
    added = json.loads(arrived)
    assert added["targetSessionId"] == P and added["id"].startswith("courier-")
    assert [hop["sessionId"] for hop in added["hops"]] == [C]
