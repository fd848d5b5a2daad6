"""At exit on a full disk, when the reserve cannot hold every fail-safe close, a large one (a child's
request of up to 1 MiB, random text, which does not pack) does not keep the usual ones out: taken in
the order observed, one first in the queue kept every later close out, and the next start called
those asks withdrawn though their children had read the denial. Review of ea45d2e."""

from __future__ import annotations

import json
import os

from core.history import spool
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from core.wire.response import deny

DENIAL = deny(responder="s", at_ms=1, decided_by=None, reason="the history could not record the verdict")


def _close(i: int, message: str) -> ServeEvent:
    raw = json.dumps({"id": f"r{i}", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
                      "requesterAgentName": "Explore", "message": message, "surface": "bash",
                      "value": f"make {i}"}).encode()
    return ServeEvent("answered", AskKey("s", f"r{i}.json"), 10.0 + i, parse_request(raw), DENIAL,
                      "fail-safe", "the history could not record the verdict", raw=raw)


def test_one_large_close_first_does_not_keep_the_others_out_of_the_reserve() -> None:
    """When the reserve cannot hold every fail-safe close, a large one does not keep the usual ones
    out: one child's large request (random text, which does not pack) first in the queue kept every
    later close out (the longest run from the first that fit was none)."""
    large = _close(0, os.urandom(300_000).hex())
    events = [large, *(_close(i, "x" * 600) for i in range(1, 51))]
    lines = [json.dumps(spool._encoded(e)).encode() + b"\n" for e in events]
    assert len(spool.packed(lines[:1])) > spool.RESERVE_BYTES - spool.RESERVE_MARGIN  # alone too large
    assert spool._closes_that_fit(events, lines) == lines[1:]  # the others, in the order observed
