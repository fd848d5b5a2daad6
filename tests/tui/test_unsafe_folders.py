"""The app tells the person when a folder of the session tree is a link: notified, listed, not served."""

from __future__ import annotations

import os
from pathlib import Path

from textual.widgets import Static

from tests.tui.support import SERVED, make_rig, request_body, responses_dir, settle, wait_for, write_request
from tui.screens.sessions import SessionsScreen

ORPHAN = "orphan-session-1"


async def test_a_linked_responses_folder_is_notified_and_shown_in_the_sessions_view(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    sibling = tmp_path / "sibling-responses"
    sibling.mkdir()
    write_request(rig.root, request_body("req-1"))
    responses_dir(rig.root).rmdir()
    responses_dir(rig.root).symlink_to(sibling)
    write_request(rig.root, request_body("req-o", target=ORPHAN), session_id=ORPHAN)
    orphan_requests = rig.root / "sessions" / ORPHAN / "requests"
    os.rename(orphan_requests, tmp_path / "moved")
    orphan_requests.symlink_to(tmp_path / "moved")
    async with rig.app.run_test(size=(140, 40)) as pilot:
        def refused() -> bool:
            return any(n.title == "Session folder refused" for n in rig.toasts)

        await wait_for(pilot, refused, within=30)
        note = next(n for n in rig.toasts if n.title == "Session folder refused")
        assert "responses is a symbolic link (never followed)" in note.message
        await pilot.press("S")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, SessionsScreen), within=30)
        screen = rig.app.screen
        assert isinstance(screen, SessionsScreen)
        await wait_for(pilot, lambda: {SERVED, ORPHAN} <= {row.session_id for row in screen.rows}, within=30)
        await settle(pilot)
        rows = {row.session_id: row for row in screen.rows}
        assert "responses is a symbolic link" in str(rows[SERVED].problem)
        assert "requests is a symbolic link" in str(rows[ORPHAN].problem)
        screen.table.move_cursor(row=[r.session_id for r in screen.rows].index(ORPHAN))
        await pilot.press("a")
        await settle(pilot)
        assert "Not adopted" in str(screen.query_one("#sessions-note", Static).render())
        assert ORPHAN not in rig.core.served
    assert os.listdir(sibling) == []
