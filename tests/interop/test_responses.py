"""Every response pi-authorizer can write is accepted by the package's own reader."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.interop.harness import NodeDriver
from tests.interop.ids import ODD_SESSION, UUID_SESSION

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

STATES = ["approved", "approved_for_session", "denied", "denied_with_reason"]


def _build(state: str, with_decided_by: bool, responder: str) -> Any:
    from core.wire.decisions import UserDecision
    from core.wire.response import (
        ForwardedResponse,
        approve,
        approve_for_session,
        deny,
    )

    decided_by = UserDecision(via="dialog") if with_decided_by else None
    at = int(time.time() * 1000)
    makers: dict[str, Callable[[], ForwardedResponse]] = {
        "approved": lambda: approve(responder=responder, at_ms=at, decided_by=decided_by),
        "approved_for_session": lambda: approve_for_session(
            responder=responder, at_ms=at, decided_by=decided_by
        ),
        "denied": lambda: deny(responder=responder, at_ms=at, decided_by=decided_by),
        "denied_with_reason": lambda: deny(
            responder=responder, at_ms=at, decided_by=decided_by, reason="  use the staging remote "
        ),
    }
    return makers[state]()


@pytest.mark.parametrize("with_decided_by", [False, True], ids=["no-decidedBy", "decidedBy"])
@pytest.mark.parametrize("state", STATES)
def test_package_reads_our_response(
    node_driver: NodeDriver, tmp_path: Path, state: str, with_decided_by: bool
) -> None:
    from core.forwarding.inbox import SessionInbox
    from core.wire.response import (
        encode_response,
        parse_response,
    )

    responder = ODD_SESSION if state == "denied" else UUID_SESSION
    response = _build(state, with_decided_by, responder)
    data = encode_response(response)
    assert not data.endswith(b"\n")
    inbox = SessionInbox(tmp_path, responder)
    request_id = "1752600000123-k3j9x0qa-48211"
    assert inbox.write_response(request_id, data)
    path = inbox.response_path(request_id)

    read = node_driver.run("read_response.ts", [str(path)]).json_line()

    assert read is not None, f"package rejected {data!r}"
    expected: dict[str, Any] = {
        "approved": state.startswith("approved"),
        "state": state,
        "responderSessionId": responder,
        "respondedAt": response.responded_at,
    }
    if state == "denied_with_reason":
        expected["denialReason"] = "use the staging remote"
    # 20.7.3 rebuilds only the fields it knows: decidedBy and sessionGrantWidth are dropped.
    assert read == expected
    # Our own child-side reader agrees with the package's.
    ours = parse_response(data)
    assert ours is not None
    assert (ours.approved, ours.state, ours.responder_session_id, ours.denial_reason) == (
        expected["approved"],
        state,
        responder,
        expected.get("denialReason"),
    )


def test_package_rejects_what_we_reject(node_driver: NodeDriver, tmp_path: Path) -> None:
    """Sanity check of the driver: a malformed response reads as null on both sides."""
    from core.wire.response import (
        parse_response,
    )

    path = tmp_path / "bad.json"
    bad = b'{"approved":"yes","state":"approved","responderSessionId":"x"}'
    path.write_bytes(bad)
    assert node_driver.run("read_response.ts", [str(path)]).json_line() is None
    assert parse_response(bad) is None
