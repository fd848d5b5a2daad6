"""The scalar knobs this node reads, merged from config files only (never from agent files).

The person's knobs and their safety (`PERSON_KNOBS`: the decision keys, the double press,
notifications, `yoloMode`, which turns every ask into an allow, and `forwardingTimeoutMs`, how long
this node counts a child as waiting) come only from layers children cannot write: the global config
and this app's own rules file (`--rules`). A project config that sets one is ignored in this node's
reading and reported (`Settings.ignored_knobs`, issue 20); pi's own reading of the same files (the
fidelity comparison, `as_pi`) keeps it, since pi reads it.

Other pi knobs (`authorizerChain`, `promptMaxRows`, ...) are validated (`validate.py`) but not kept:
nothing here acts on them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_FORWARDING_TIMEOUT_MS = 600_000
#: The person's own knobs (the decision keys and their safety, what needs no person at all, how long a
#: child is counted as waiting): never from a layer children can write.
PERSON_KNOBS = ("doublePressToConfirm", "permissionDialogKeys", "promptNotifications", "yoloMode",
                "forwardingTimeoutMs")
#: Config layers a child can write (it works in the project): their person knobs are ignored, reported.
CHILD_WRITABLE_ORIGINS = frozenset({"project"})


@dataclass(frozen=True, slots=True)
class Settings:
    """Knobs with the reference defaults; a later scope's value replaces an earlier one whole."""

    yolo_mode: bool = False
    double_press_to_confirm: bool = True
    forwarding_timeout_ms: int = DEFAULT_FORWARDING_TIMEOUT_MS
    prompt_notifications: tuple[str, ...] = ()
    permission_dialog_keys: Mapping[str, str] = field(default_factory=dict)
    #: `<origin>: <knob>` for each person knob a child-writable layer tried to set (ignored).
    ignored_knobs: tuple[str, ...] = ()

    @classmethod
    def merged(cls, layers: Iterable[tuple[str, Mapping[str, Any]]], *, as_pi: bool = False) -> Settings:
        """Fold validated knob maps `(origin, knobs)`, lowest scope first. A person knob
        (`PERSON_KNOBS`) set by a child-writable layer (the project's) is left out and reported,
        except in pi's reading (`as_pi`)."""
        knobs: dict[str, Any] = {}
        ignored: list[str] = []
        for origin, layer in layers:
            if origin in CHILD_WRITABLE_ORIGINS and not as_pi:
                ignored += [f"{origin}: {key}" for key in PERSON_KNOBS if key in layer]
                layer = {k: v for k, v in layer.items() if k not in PERSON_KNOBS}
            knobs.update(layer)
        defaults = cls()
        return cls(
            yolo_mode=bool(knobs.get("yoloMode", defaults.yolo_mode)),
            double_press_to_confirm=bool(
                knobs.get("doublePressToConfirm", defaults.double_press_to_confirm)
            ),
            forwarding_timeout_ms=int(knobs.get("forwardingTimeoutMs", defaults.forwarding_timeout_ms)),
            prompt_notifications=tuple(knobs.get("promptNotifications", ())),
            permission_dialog_keys=dict(knobs.get("permissionDialogKeys", {})),
            ignored_knobs=tuple(ignored),
        )
