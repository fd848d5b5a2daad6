"""The app shows both agent names of an ask and flags when they differ (the rules use the principal)."""

from __future__ import annotations

from pathlib import Path

from tests.tui.support import make_rig, rendered_text, request_body, wait_for, wait_rows, write_request


async def test_the_ask_detail_flags_a_requester_that_is_not_the_principal(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("mismatch", agent="Explore", extra={"requesterAgentName": "Plan"}))
    async with rig.app.run_test(size=(140, 60)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await wait_for(pilot, lambda: "requesterAgentName differs" in rendered_text(rig.app))
        text = rendered_text(rig.app)
        assert "requesterAgentName differs from principal.agentName (the rules use the principal)" in text
        assert "agentName Plan" in text and "agentName Explore" in text
