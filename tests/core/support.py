"""What the serving tests of `tests/core` share: bursts written and served, folders planted with links."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Collection
from pathlib import Path

from core.disk.paths import encode_session_id
from core.forwarding.outbox import Outboxes
from core.history import HistoryRow, HistoryStore
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import request_body, session_dir, wait_for, write_request
from tests.history.support import Node, S, intent

ALLOW_LS = {"bash": {"*": "ask", "ls *": "allow"}}



def write_burst(root: Path, count: int, prefix: str = "b") -> list[str]:
    """Half the asks carry facts a rule allows, half carry none (a fail-safe denial answers them)."""
    ids = [f"{prefix}{i:04d}" for i in range(count)]
    for i, rid in enumerate(ids):
        if i % 2:
            write_request(root, S, rid, accessIntent=intent("bash", f"ls {rid}"))
        else:
            write_request(root, S, rid)
    return ids



def responses(root: Path) -> dict[str, bytes]:
    folder = session_dir(root, S) / "responses"
    if not folder.exists():
        return {}
    return {p.name.removesuffix(".json"): p.read_bytes() for p in folder.iterdir() if p.suffix == ".json"}



def requests_left(root: Path) -> list[str]:
    return sorted(p.name for p in (session_dir(root, S) / "requests").iterdir())



def rows_by_request(history: HistoryStore) -> dict[str, HistoryRow]:
    rows = [row for row in history.query() if row.outcome != "quarantined"]
    counted = Counter(row.request_id for row in rows)
    assert all(n == 1 for n in counted.values()), f"more than one row for a request: {counted}"
    return {row.request_id or "": row for row in rows}



async def serve_until_answered(node: Node, ids: Collection[str], stages: list[str]) -> None:
    node.fault = stages.append
    await node.start(DenyingArbiter())
    try:
        await wait_for(
            lambda: set(responses(node.root)) >= set(ids) and not requests_left(node.root),
            within=60,
            what="every ask answered and its request removed",
        )
        await wait_for(lambda: all(r.written == 1 for r in node.history.query() if r.verdict), what="noted")
    finally:
        await node.stop()



def assert_answered_once(node: Node, ids: list[str]) -> None:
    """Each request: gone from the inbox, one response whose bytes are its one recorded verdict."""
    published = responses(node.root)
    assert sorted(published) == sorted(ids)
    rows = rows_by_request(node.history)
    assert sorted(rows) == sorted(ids)
    for rid in ids:
        row = rows[rid]
        allowed = int(rid[-4:]) % 2 == 1
        assert row.response == published[rid]
        assert (row.verdict, row.written) == ("approved" if allowed else "denied_with_reason", 1)
        assert row.ended_at is not None
    answered = Counter(e.key.name for e in node.events if e.kind == "answered")
    assert answered == Counter(f"{rid}.json" for rid in ids)
    folder = session_dir(node.root, S) / "responses"
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []






def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder` (links as their target, never followed) with its content."""
    seen: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                seen[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                seen[rel] = "dir"
            else:
                seen[rel] = path.read_bytes()
    return seen



CONTROL = "019ff969-c34c-70be-9034-c0c0c0c0c0c0"



FOLDER = encode_session_id(S)



ROOT_LEVELS = {
    "sessions": ("root", "sessions"),
    "session folder": ("root", "sessions", FOLDER),
    "requests": ("root", "sessions", FOLDER, "requests"),
    "responses": ("root", "sessions", FOLDER, "responses"),
    "serving": ("root", "serving"),
}



STATE_LEVELS = {
    "quarantine": ("state", "quarantine"),
    "quarantine folder": ("state", "quarantine", FOLDER),
}



def plant_bait(foreign: Path) -> None:
    """Whatever level a link lands on, the folder it points at looks worth acting on."""
    for requests in (foreign, foreign / "requests", foreign / FOLDER / "requests"):
        requests.mkdir(parents=True, exist_ok=True)
        (requests.parent / "responses").mkdir(parents=True, exist_ok=True)
        (requests / "bait.json").write_text(json.dumps(request_body("bait", S)))
        (requests / "junk.json").write_text("{not json")
    (foreign / f"{FOLDER}.json").write_text('{"sessionId":"x","pid":1,"updatedAt":1}')
    (foreign / f"{FOLDER}.lock").write_text("foreign")



def plant_link(tmp_path: Path, parts: tuple[str, ...], foreign: Path) -> None:
    where = tmp_path.joinpath(*parts)
    if where.is_symlink():
        where.unlink()
    elif where.is_dir():
        shutil.rmtree(where)  # never follows the links inside
    where.parent.mkdir(parents=True, exist_ok=True)
    where.symlink_to(foreign)



def session_with_requests(root: Path) -> None:
    write_request(root, S, "mine")
    (session_dir(root, S) / "requests" / "junk.json").write_text("{not json")


def tell(call: Callable[..., object], *args: object) -> None:
    """An outbox's `tell` on the test's own thread: what a read finds is called at once."""
    call(*args)


def looked(boxes: Outboxes, folder: Path, names: list[str]) -> frozenset[str] | None:
    """What `boxes` vouches `folder` holds of `names` (None: it cannot vouch)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return boxes.existing(fd, names, tell)
    finally:
        os.close(fd)
