"""At exit on a full disk, when the reserve cannot hold every fail-safe close, a large one (a child's
request of up to 1 MiB, random text, which does not pack) does not keep the usual ones out: taken in
the order observed, one first in the queue kept every later close out, and the next start called
those asks withdrawn though their children had read the denial. Review of ea45d2e."""

from __future__ import annotations

import json
import os

from core.history import spool
from tests.history.support import spooled_close


def test_one_large_close_first_does_not_keep_the_others_out_of_the_reserve() -> None:
    """When the reserve cannot hold every fail-safe close, a large one does not keep the usual ones
    out: one child's large request (random text, which does not pack) first in the queue kept every
    later close out (the longest run from the first that fit was none)."""
    large = spooled_close(0, os.urandom(300_000).hex())
    events = [large, *(spooled_close(i, "x" * 600) for i in range(1, 51))]
    lines = [json.dumps(spool._encoded(e)).encode() + b"\n" for e in events]
    assert len(spool.packed(lines[:1])) > spool.RESERVE_BYTES - spool.RESERVE_MARGIN  # alone too large
    budget = spool.RESERVE_BYTES - spool.RESERVE_MARGIN
    assert spool._closes_that_fit(events, lines, budget) == lines[1:]  # the others, in the order observed
