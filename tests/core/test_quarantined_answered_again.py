"""A malformed file answered by a run killed before its quarantine moved it is not answered again by the
next run after its child read the first answer (campaign4, burst seed 418: `b-007901`, two entries under
one response name). The first run commits the `quarantined` row, writes the explained `gate_error`
denial and notes it in that row, then dies before the move; the child reads that denial and deletes it
(a pi child deletes its response, then its request); the next run reads the request in between, finds
the note for these very bytes and moves the file without a second answer."""

from __future__ import annotations

from pathlib import Path

from core.vocabulary.asks import DenyingArbiter
from tests.helpers import response_path, session_dir, wait_for, write_request_bytes
from tests.history.support import Node, S, run_until_killed


async def test_a_malformed_file_whose_child_read_its_denial_is_not_answered_again_after_a_kill(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    write_request_bytes(node.root, S, "m1.json", b'{"id": "m1", "createdAt": NaN}')
    killed = run_until_killed(tmp_path, "reasoned")  # the row and the answer written, the move not made
    assert killed.returncode == 137, killed.stderr
    response = response_path(node.root, S, "m1")
    assert response.exists(), "the first run answered the malformed file before its move"
    response.unlink()  # its child read it; its request is deleted next
    request = session_dir(node.root, S) / "requests" / "m1.json"
    await node.start(DenyingArbiter())
    try:
        await wait_for(lambda: not request.exists(), what="the malformed file set aside")
    finally:
        await node.stop()
    assert not response.exists(), "answered twice: a second denial after its child read the first"
