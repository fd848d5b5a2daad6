"""The app shows what the serving core reports: forged responses, a session it cannot serve."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.tui.support import (
    make_rig,
    request_body,
    requests_dir,
    responses_dir,
    settle,
    wait_for,
    wait_rows,
    write_request,
)


async def test_a_forged_response_is_shown_as_an_error(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-f"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        (responses_dir(rig.root) / "req-f.json").write_text('{"approved":true,"state":"approved"}')
        await rig.core.rescan_all()
        await wait_for(pilot, lambda: any(n.title == "Forged response" for n in rig.toasts))
        await wait_rows(pilot, rig.app, 0)
        assert any(e.what == "forged" for e in rig.app.history)


async def test_an_unlistable_inbox_is_shown_until_it_heals(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-x"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        folder = requests_dir(rig.root)
        shutil.rmtree(folder)
        folder.symlink_to(folder.name)  # a link loop: listing fails
        await rig.core.rescan_all()
        await wait_for(pilot, lambda: any(n.title == "Not serving" for n in rig.toasts))
        assert rig.app.sub_title.startswith("NOT SERVING")
        folder.unlink()
        folder.mkdir()
        await rig.core.rescan_all()
        await settle(pilot)
        assert not rig.app.sub_title.startswith("NOT SERVING")
