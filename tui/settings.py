"""What the app takes from the pi config (filled by the CLI): confirmation, signals, keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: pi's `permissionDialogKeys` names → this app's binding ids.
DIALOG_KEY_BINDINGS: Mapping[str, str] = {
    "approve": "ask.approve",
    "approveSession": "ask.approve_session",
    "approveSessionBoth": "ask.approve_session_both",
    "deny": "ask.deny",
    "denyWithReason": "ask.deny_reason",
}
NOTIFICATION_CHANNELS = frozenset({"bell", "osc9", "osc777"})


@dataclass(frozen=True)
class UiSettings:
    """The person-facing knobs. `dialog_keys` uses pi's names (`approve`, `deny`, ...)."""

    double_press: bool = True
    prompt_notifications: tuple[str, ...] = ()
    input_grace_ms: int = 500
    dialog_keys: dict[str, str] = field(default_factory=dict)


def dialog_keymap(
    dialog_keys: Mapping[str, str], reserved: frozenset[str]
) -> tuple[dict[str, str], list[str]]:
    """pi's `permissionDialogKeys` as an app keymap, and the entries refused (which keep defaults).

    Like pi (#927): one printable lower-case character, not `j`/`k`, no duplicates; here also not
    a key another binding of the queue screen already uses (`reserved`).
    """
    keymap: dict[str, str] = {}
    refused: list[str] = []
    used: set[str] = set()
    for name, key in dialog_keys.items():
        binding_id = DIALOG_KEY_BINDINGS.get(name)
        problem = None
        if binding_id is None:
            problem = "not a remappable decision here"
        elif not isinstance(key, str) or len(key) != 1 or not key.isprintable() or key.isspace():
            problem = "must be one printable character"
        elif key in "jk" or key != key.lower():
            problem = "j, k and upper-case letters are not allowed"
        elif key in used or key in reserved:
            problem = "already used by another key"
        if problem is not None or binding_id is None:
            refused.append(f"{name}={key!r}: {problem}")
            continue
        used.add(key)
        keymap[binding_id] = key
    return keymap, refused
