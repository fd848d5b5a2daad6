"""How wide a pattern is, said in words: a pattern that matches far more than the value asked.

Every place that records or writes a pattern (`s`, `w`, `R`, the review's suggestions) shows the
exact pattern and, for a wide one, a warning the person cannot miss (issue 34 finding 4: `s` on
`ls` with the child's pattern `*` said only "Approved … bash ls"). Wide means: a pattern that
matches every value of its surface (`*`, `**`, a pattern whose optional tail leaves `*`), and on a
path surface one that covers `/` or the home folder, matches in any folder, or reaches outside the
requester's working folder (after `~` expansion and `..` resolution, as the matcher acts).
"""

from __future__ import annotations

import re

from core.rules.matcher import expand_home
from core.rules.model import PATH_SURFACES
from core.rules.overlap import alternatives


def noun(surface: str) -> str:
    """What one value of `surface` is called."""
    if surface == "bash":
        return "bash command"
    if surface in PATH_SURFACES:
        return f"{surface} path"
    return f"{surface} value"


def how_wide(surface: str, pattern: str, home: str, cwd: str | None = None) -> str | None:
    """A warning for a pattern much wider than one value (`matches every bash command`), else None."""
    expanded = expand_home(pattern, home)
    if any(glob and not glob.strip("*") for glob in alternatives(expanded)):
        return f"matches every {noun(surface)}"
    if surface not in PATH_SURFACES or not re.search(r"[*?]", expanded):
        return None
    head = re.split(r"[*?]", expanded, maxsplit=1)[0]
    folder = head if head.endswith("/") else head.rsplit("/", 1)[0] + "/" if "/" in head else ""
    if not head:
        return f"matches {noun(surface)}s in any folder"
    if not folder.startswith("/"):
        return None  # relative: it matches only values written from that folder down
    if folder == "/":
        return f"matches every {noun(surface)} on the disk (under /)"
    if folder.rstrip("/") == home.rstrip("/"):
        return f"matches every {noun(surface)} in your home folder ({home})"
    if cwd and cwd.startswith("/") and not (folder.rstrip("/") + "/").startswith(cwd.rstrip("/") + "/"):
        return f"reaches outside the requester's folder {cwd} (matches under {folder})"
    return None
