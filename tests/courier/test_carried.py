"""The asks a courier keeps while it carries them (`core/courier/carried.py`): what a restart reads back
to withdraw the parcels of children that gave up while no courier ran (campaign finding 3)."""

from __future__ import annotations

import os
from pathlib import Path

from core.courier.carried import CarriedAsks, carried_of
from core.vocabulary.asks import AskKey
from tests.helpers import write_request_bytes

PARCEL = "courier-" + "ab" * 20


def test_a_kept_ask_is_read_back_until_it_is_done(tmp_path: Path) -> None:
    kept = CarriedAsks(tmp_path / "carried", tmp_path / "root")
    carried = carried_of(PARCEL, AskKey("sess-1", "r1.json"), "host-a", "r1", "digest")
    kept.keep(carried)
    assert CarriedAsks(tmp_path / "carried", tmp_path / "root").kept() == [carried]  # a new run reads it
    assert (os.stat(tmp_path / "carried" / PARCEL).st_mode & 0o777) == 0o600
    kept.done(PARCEL)
    assert kept.kept() == []


def test_the_request_file_says_whether_the_child_still_waits(tmp_path: Path) -> None:
    kept = CarriedAsks(tmp_path / "carried", tmp_path / "root")
    carried = carried_of(PARCEL, AskKey("sess-1", "r1.json"), "host-a", "r1", "digest")
    assert not kept.request_present(carried)
    write_request_bytes(tmp_path / "root", "sess-1", "r1.json", b"{}")
    assert kept.request_present(carried)
    # a name that is no file of the inbox is never taken for a child that gave up
    odd = carried_of(PARCEL, AskKey("sess-1", "../r1.json"), "host-a", "r1", "digest")
    assert kept.request_present(odd)


def test_a_record_that_is_not_a_kept_ask_is_ignored(tmp_path: Path) -> None:
    folder = tmp_path / "carried"
    kept = CarriedAsks(folder, tmp_path / "root")
    (folder / PARCEL).write_bytes(b"not json")
    (folder / ("courier-" + "cd" * 20)).write_text('{"parcel_id": "courier-other"}')
    kept.keep(carried_of("not-minted", AskKey("s", "n.json"), "h", "r", "d"))  # no id this node minted
    assert kept.kept() == []
    assert CarriedAsks(None).kept() == []
