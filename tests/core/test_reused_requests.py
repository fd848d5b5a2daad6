"""Answering in a request's own file (`core.disk.reused`): only a file this node could have made
itself, holding exactly what was judged, is ever rewritten; anything else is left byte for byte.

Real files in temp dirs; the serving tests run a real `ServingCore` with a real history.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.disk.reused import reuse_request
from core.disk.tree import FILE_MODE
from core.platform import anonymous_files
from core.serving import ServingCore
from core.serving.asks import DenyingArbiter
from tests.core.support import ALLOW_LS, assert_answered_once, serve_until_answered, write_burst
from tests.helpers import session_dir, wait_for
from tests.history.support import Node, S

REQUEST = b'{"id":"r1","kind":"a request"}'
BODY = b'{"approved":true}'
PLACES_BY_DESCRIPTOR = pytest.mark.skipif(
    not anonymous_files(), reason="no O_TMPFILE or no procfs here: requests are never rewritten"
)


@contextmanager
def folders(tmp_path: Path) -> Iterator[tuple[Path, int, int]]:
    requests, responses = tmp_path / "requests", tmp_path / "responses"
    requests.mkdir(exist_ok=True)
    responses.mkdir(exist_ok=True)
    req = os.open(requests, os.O_RDONLY | os.O_DIRECTORY)
    res = os.open(responses, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield requests, req, res
    finally:
        os.close(req)
        os.close(res)


def reuse(req: int, res: int, judged: bytes = REQUEST, body: bytes = BODY) -> int | None:
    return reuse_request(req, "r1.json", judged, body, res, "r1.json", os.fstat(res).st_dev)


@PLACES_BY_DESCRIPTOR
def test_the_request_file_itself_holds_the_answer_and_is_linked_as_the_response(tmp_path: Path) -> None:
    with folders(tmp_path) as (requests, req, res):
        (requests / "r1.json").write_bytes(REQUEST)
        inode = (requests / "r1.json").stat().st_ino
        fd = reuse(req, res)
        assert fd is not None
        try:
            os.link(f"/proc/self/fd/{fd}", "r1.json", dst_dir_fd=res, follow_symlinks=True)
        finally:
            os.close(fd)
    response = tmp_path / "responses" / "r1.json"
    assert response.read_bytes() == BODY  # the longer request's tail is cut
    assert response.stat().st_ino == inode  # no file was created
    assert stat.S_IMODE(response.stat().st_mode) == FILE_MODE


def test_a_request_shorter_than_its_answer_grows(tmp_path: Path) -> None:
    with folders(tmp_path) as (requests, req, res):
        (requests / "r1.json").write_bytes(b"{}")
        fd = reuse(req, res, judged=b"{}", body=BODY * 3)
        assert fd is not None
        os.close(fd)
        assert (requests / "r1.json").read_bytes() == BODY * 3


def test_a_hard_link_to_another_file_is_never_written(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_bytes(REQUEST)
    with folders(tmp_path) as (requests, req, res):
        os.link(precious, requests / "r1.json")
        assert reuse(req, res) is None
    assert precious.read_bytes() == REQUEST


def test_a_symbolic_link_is_never_followed(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_bytes(REQUEST)
    with folders(tmp_path) as (requests, req, res):
        (requests / "r1.json").symlink_to(precious)
        assert reuse(req, res) is None
    assert precious.read_bytes() == REQUEST


def test_a_fifo_or_a_folder_is_refused_without_blocking(tmp_path: Path) -> None:
    with folders(tmp_path) as (requests, req, res):
        os.mkfifo(requests / "r1.json")
        assert reuse(req, res) is None
        (requests / "r1.json").unlink()
        (requests / "r1.json").mkdir()
        assert reuse(req, res) is None


def test_a_request_replaced_since_it_was_judged_is_left_alone(tmp_path: Path) -> None:
    with folders(tmp_path) as (requests, req, res):
        newer = REQUEST.replace(b"a request", b"a newer one")
        (requests / "r1.json").write_bytes(newer)
        assert reuse(req, res) is None
        assert (requests / "r1.json").read_bytes() == newer


def test_an_answer_already_there_leaves_the_request_as_it_is(tmp_path: Path) -> None:
    with folders(tmp_path) as (requests, req, res):
        (requests / "r1.json").write_bytes(REQUEST)
        (tmp_path / "responses" / "r1.json").write_bytes(b"someone else's")
        assert reuse(req, res) is None
        assert (requests / "r1.json").read_bytes() == REQUEST


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(judged=st.binary(max_size=300), held=st.binary(max_size=300), body=st.binary(min_size=1, max_size=300))
def test_rewritten_exactly_when_it_holds_what_was_judged(
    tmp_path_factory: pytest.TempPathFactory, judged: bytes, held: bytes, body: bytes
) -> None:
    tmp_path = tmp_path_factory.mktemp("reuse")
    with folders(tmp_path) as (requests, req, res):
        (requests / "r1.json").write_bytes(held)
        fd = reuse(req, res, judged=judged, body=body)
        if fd is not None:
            os.close(fd)
        assert (fd is not None) == (held == judged)
        assert (requests / "r1.json").read_bytes() == (body if held == judged else held)


@PLACES_BY_DESCRIPTOR
async def test_a_burst_answers_hard_linked_requests_in_new_files(tmp_path: Path) -> None:
    """In a burst served with a history, the requests are answered in place, except one that is a
    second name of a file outside the inbox: that file keeps its bytes, its ask is answered all the
    same."""
    node = Node(tmp_path, ALLOW_LS)
    ids = write_burst(node.root, 40)
    requests = session_dir(node.root, S) / "requests"
    precious = tmp_path / "precious.json"
    os.link(requests / f"{ids[7]}.json", precious)
    kept = precious.read_bytes()
    inodes = {rid: (requests / f"{rid}.json").stat().st_ino for rid in ids}
    await serve_until_answered(node, ids, [])
    assert_answered_once(node, ids)
    assert precious.read_bytes() == kept
    responses = session_dir(node.root, S) / "responses"
    reused = [rid for rid in ids if (responses / f"{rid}.json").stat().st_ino == inodes[rid]]
    assert ids[7] not in reused and len(reused) >= len(ids) // 2
    node.history.close()


async def test_without_a_history_nothing_is_answered_in_place(tmp_path: Path) -> None:
    """Only a recorded verdict can be found again once its request's bytes are gone."""
    root = tmp_path / "root"
    ids = write_burst(root, 20)
    requests, responses = session_dir(root, S) / "requests", session_dir(root, S) / "responses"
    inodes = {rid: (requests / f"{rid}.json").stat().st_ino for rid in ids}
    core = ServingCore(root, tmp_path / "state", DenyingArbiter())
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        await wait_for(lambda: all((responses / f"{rid}.json").exists() for rid in ids), what="answered")
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)
    assert all((responses / f"{rid}.json").stat().st_ino != inodes[rid] for rid in ids)


async def test_a_request_replaced_after_it_was_judged_is_never_written(tmp_path: Path) -> None:
    """The child replaces one request (a new file under its name) after it was judged and before the
    batch is recorded: the new file is never rewritten (its bytes are not what was judged)."""
    node = Node(tmp_path, ALLOW_LS)
    ids = write_burst(node.root, 12)
    requests = session_dir(node.root, S) / "requests"
    judged = (requests / f"{ids[3]}.json").read_bytes()
    newer = judged.replace(b"ls", b"rm", 1)  # as long as what was judged: only its bytes differ
    assert newer != judged and len(newer) == len(judged)
    held: list[int] = []

    def replace_once(stage: str) -> None:
        if stage == "arrived" and not held:
            (requests / "swap.tmp").write_bytes(newer)
            os.replace(requests / "swap.tmp", requests / f"{ids[3]}.json")
            held.append(os.open(requests / f"{ids[3]}.json", os.O_RDONLY))

    node.fault = replace_once
    await node.start(DenyingArbiter())
    try:
        await wait_for(lambda: bool(held) and all(
            (session_dir(node.root, S) / "responses" / f"{rid}.json").exists() for rid in ids
        ), what="every ask answered")
    finally:
        await node.stop()
    try:
        assert os.pread(held[0], 1024, 0) == newer
    finally:
        os.close(held[0])
    node.history.close()
