"""The status line follows the order of the core's events: what the serving core and the person's
slot report reaches the screens as Messages, handled in the order they were posted, and a note
the app sets about its own call comes after the events that call caused."""

from __future__ import annotations

import threading
from pathlib import Path

from textual.message import Message

from core.person import AskDecided
from core.serving import ServeEvent
from tests.tui.support import (
    make_rig,
    request_body,
    requests_dir,
    settle,
    wait_for,
    wait_response,
    wait_rows,
    write_request,
)
from tui.core_events import HumanChanged, ServingChanged
from tui.ui_settings import UiSettings


async def test_a_decision_is_not_overwritten_by_an_event_posted_before_it(tmp_path: Path) -> None:
    """At 80x24 a notice goes to the status line. A file is quarantined while the person's approval is
    being written: the quarantine came first, so the line ends on the approval, not on the notice."""
    quarantined = threading.Event()
    held: list[str] = []

    def hold_the_first_write(stage: str) -> None:
        """On the publisher's thread, while the approval is being written (the app busy with the key):
        an unusable request arrives, and the write goes on once the core has reported it."""
        if stage != "arrived" or held:
            return
        held.append(stage)
        folder = requests_dir(rig.root)
        (folder / ".garbage.tmp").write_bytes(b"{ not json")
        (folder / ".garbage.tmp").rename(folder / "garbage.json")
        assert quarantined.wait(30)  # a hang guard

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False), fault=hold_the_first_write)
    write_request(rig.root, request_body("first"))
    seen: list[Message] = []
    async with rig.app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
        def observed(event: ServeEvent) -> None:  # subscribed after the app: its Message is posted first
            if event.kind == "quarantined":
                quarantined.set()

        rig.core.subscribe(observed)
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y")
        await wait_response(pilot, rig.root, "first")
        await wait_for(pilot, lambda: {"quarantined", "approved"} <= {e.what for e in rig.app.history})
        await settle(pilot)
        assert held and quarantined.is_set()
        kinds = [e.what for e in rig.app.history]
        assert kinds.index("quarantined") < kinds.index("approved")  # the history is in event order
        assert rig.app.queue.status_text.startswith("Approved once: "), rig.app.queue.status_text
        # Both reached the app as Messages, the decision too, in the order the events happened.
        order = [("decided" if isinstance(m, HumanChanged) else "quarantined") for m in seen
                 if (isinstance(m, HumanChanged) and isinstance(m.event, AskDecided))
                 or (isinstance(m, ServingChanged) and m.event.kind == "quarantined")]
        assert order == ["quarantined", "decided"]
