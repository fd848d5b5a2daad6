"""Where things live on disk: the pi agent dir, the forwarding root and pi-authorizer's own state.

The layout is the reference's (`docs/design/contract.md` § Layout); session folders use JavaScript's
`encodeURIComponent` of the trimmed id so a real pi child and this node agree on every byte.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from urllib.parse import quote

import platformdirs

# encodeURIComponent leaves exactly these unescaped (besides ASCII letters and digits).
_URI_COMPONENT_SAFE = "-_.!~*'()"
SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]+$")


class InvalidSessionId(ValueError):
    """A session id that names no inbox (empty, `unknown`, or not encodable)."""


def normalize_session_id(raw: str) -> str:
    """Trim and validate a session id the way the reference does; raise when it names no session."""
    trimmed = raw.strip()
    if not trimmed or trimmed.lower() == "unknown":
        raise InvalidSessionId(f"session id {raw!r} names no session (empty or 'unknown')")
    try:
        trimmed.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidSessionId(f"session id {raw!r} is not valid Unicode text") from exc
    return trimmed


def encode_session_id(session_id: str) -> str:
    """`encodeURIComponent(sessionId.trim())`: the session's folder name under `sessions/`."""
    return quote(normalize_session_id(session_id), safe=_URI_COMPONENT_SAFE)


def is_safe_request_id(value: str) -> bool:
    """The reference's only guard against an id choosing a path (`^[A-Za-z0-9._-]+$`)."""
    return SAFE_REQUEST_ID.fullmatch(value) is not None and value not in {".", ".."}


def agent_dir() -> Path:
    """Pi's agent dir: `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`."""
    configured = os.environ.get("PI_CODING_AGENT_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".pi" / "agent"


def default_forwarding_root() -> Path:
    """`<agentDir>/sessions/permission-forwarding`, the root every pi child writes under."""
    return agent_dir() / "sessions" / "permission-forwarding"


def default_state_dir() -> Path:
    """pi-authorizer's own state (locks, quarantine, history): never inside the forwarding root."""
    return Path(platformdirs.user_state_dir("pi-authorizer", appauthor=False))


#: Where a child looks for its inbox, below its agent dir.
ROOT_IN_AGENT_DIR = Path("sessions") / "permission-forwarding"


def agent_dir_of(root: Path) -> Path | None:
    """The agent dir whose children write under `root`, or None when `root` is outside the standard
    layout (`<agentDir>/sessions/permission-forwarding`): no child can be pointed at it."""
    if root.parts[-2:] != ROOT_IN_AGENT_DIR.parts:
        return None
    return root.parent.parent


def forwarding_env(session_id: str, root: Path | None = None) -> dict[str, str]:
    """What a headless pi needs to forward to `session_id` (20.7.3 also needs the subagent marker);
    with a `root` other than the default one, its agent dir too (when it has one)."""
    env = {"PI_SUBAGENT_PARENT_SESSION": session_id, "PI_IS_SUBAGENT": "1"}
    home = agent_dir_of(root) if root is not None and root != default_forwarding_root() else None
    if home is not None:
        env["PI_CODING_AGENT_DIR"] = str(home)
    return env


def env_line(session_id: str, root: Path | None = None) -> str:
    """`forwarding_env` as one shell line a person pastes before an agent's command."""
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in forwarding_env(session_id, root).items())
