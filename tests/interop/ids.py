"""Session ids shared by the interop tests."""

from __future__ import annotations

# A real pi session id is a UUID; it passes encodeURIComponent unchanged.
UUID_SESSION = "019ff969-c34c-70be-9034-fae19c852932"
CHILD_SESSION = "019ff96a-1111-7000-8000-aaaaaaaaaaaa"

# The awkward id from `docs/design/contract.md` § Layout: space, slash and a non-ASCII letter.
ODD_SESSION = "parent session/ü 2"
ODD_SESSION_FOLDER = "parent%20session%2F%C3%BC%202"
