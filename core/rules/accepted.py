"""The last accepted content of every config file, kept in the state dir across restarts.

A widening change held while this node runs must stay held after a restart (issue 34 finding 2: a
child wrote `bash: {"*": "allow"}` into the project layer, it was held, and the next start applied
it silently, since the files present at start were trusted as they were). So the store records the
text of each config and agent file as last accepted (in force: trusted at a first start, narrowed,
accepted by the person, written by a confirmed rule) in `<state>/accepted-config.json`, and at the
next start a file whose text differs is gated against that text exactly as a change while running
is. A file that did not exist then is gated against an empty file, when the record watched it (its
path, or its agents folder, was in force then); a path no earlier start watched (a `--rules` file
named for the first time, another project) is trusted as it is, as at a first start. Nodes that
share a state dir (a courier and an approver on one machine) each keep their own paths in one
record: a save replaces only the entries of the paths and folders this node watches.

The record is the node's own state (children never write the state dir, `docs/design/reliability.md`);
one that is missing or unreadable is a first start: the files are trusted as they are, and recorded.
A record that cannot be written is logged, never raised: serving never depends on it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.disk.entries import replace_file
from core.disk.tree import FILE_MODE

log = logging.getLogger("pi_authorizer.rules")
RECORD_NAME = "accepted-config.json"
_VERSION = 2


@dataclass(frozen=True)
class Recorded:
    """What the record holds: path → the text last accepted, and the paths and folders watched then."""

    texts: dict[str, str]
    watched: frozenset[str]

    def knows(self, path: Path) -> bool:
        """Whether an earlier start watched `path` (its file, or the folder it is in)."""
        return str(path) in self.texts or str(path) in self.watched or str(path.parent) in self.watched


class AcceptedRecord:
    """`<state>/accepted-config.json`: path → the text last accepted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written: dict[str, str] | None = None

    def _read(self) -> Recorded | None:
        data = json.loads(self.path.read_text(encoding="utf-8"))
        files = data["files"]
        texts = {str(path): str(entry["text"]) for path, entry in files.items()
                 if hashlib.sha256(str(entry["text"]).encode("utf-8", "surrogatepass")).hexdigest()
                 == entry["sha256"]}
        watched = frozenset(str(path) for path in data.get("watched", files))
        return Recorded(texts, watched)

    def load(self) -> Recorded | None:
        """The record, or None when there is no usable record (a first start)."""
        try:
            recorded = self._read()
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("the record of accepted config (%s) is unusable (%s): the files are trusted as "
                        "they are now", self.path, exc)
            return None
        return recorded

    def save(self, texts: dict[str, str], watched: Iterable[str]) -> None:
        """Record `texts` for the paths and folders in `watched`, keeping another node's entries
        (written whole, then renamed into place); unchanged texts are not rewritten."""
        if texts == self._written:
            return
        mine = frozenset(watched)
        try:
            others = self._read()
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            others = None
        merged: dict[str, str] = {}
        kept: set[str] = set(mine)
        if others is not None:
            merged = {path: text for path, text in others.texts.items()
                      if path not in mine and str(Path(path).parent) not in mine}
            kept |= others.watched
        merged.update(texts)
        document = {"version": _VERSION, "watched": sorted(kept), "files": {
            path: {"sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), "text": text}
            for path, text in sorted(merged.items())}}
        data = json.dumps(document, ensure_ascii=True, indent=1).encode("ascii")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                replace_file(fd, self.path.name, data, FILE_MODE)
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("the record of accepted config (%s) could not be written: %s", self.path, exc)
            return
        self._written = dict(texts)
