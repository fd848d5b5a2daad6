"""The scalar knobs this node reads, merged from config files only (never from agent files).

The person's knobs and their safety (`PERSON_KNOBS`: the decision keys, the double press,
notifications, `yoloMode`, which turns every ask into an allow, and `forwardingTimeoutMs`, how long
this node counts a child as waiting). **Every config file is writable by a child running as the same
user** (the global pi config under `~/.pi/agent/`, the project's, the `--rules` file): none is the
person's alone. So: a project config (any child working in the project writes it) sets none of them:
each is ignored in this node's reading and reported (`Settings.ignored_knobs`, issue 20); and
`doublePressToConfirm: false` is ignored and reported from **every** file (issue 34 finding 3: a
same-user child wrote it with swapped keys into the global config and one `n` approved): only the
person's own command line (`--no-double-press`) turns the double press off. The decision keys a file
may remap are checked where they are bound (`tui.actions.dialog_keymap`). pi's own reading of the
same files (the fidelity comparison, `as_pi`) keeps them all, since pi reads them.

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
#: Config layers a child working in the project writes: their person knobs are ignored, reported.
CHILD_WRITABLE_ORIGINS = frozenset({"project"})
#: Knob values no config file may set (every one is writable by a same-user child), ignored, reported.
REFUSED_FROM_FILES = (("doublePressToConfirm", False),)


@dataclass(frozen=True, slots=True)
class Settings:
    """Knobs with the reference defaults; a later scope's value replaces an earlier one whole."""

    yolo_mode: bool = False
    double_press_to_confirm: bool = True
    forwarding_timeout_ms: int = DEFAULT_FORWARDING_TIMEOUT_MS
    prompt_notifications: tuple[str, ...] = ()
    permission_dialog_keys: Mapping[str, str] = field(default_factory=dict)
    #: The layer whose `permissionDialogKeys` is in force (named when its entries are refused).
    dialog_keys_origin: str | None = None
    #: `<origin>: <knob>` for each person knob a child-writable layer tried to set (ignored).
    ignored_knobs: tuple[str, ...] = ()

    @classmethod
    def merged(cls, layers: Iterable[tuple[str, Mapping[str, Any]]], *, as_pi: bool = False) -> Settings:
        """Fold validated knob maps `(origin, knobs)`, lowest scope first. A person knob
        (`PERSON_KNOBS`) set by a child-writable layer (the project's) is left out and reported,
        except in pi's reading (`as_pi`)."""
        knobs: dict[str, Any] = {}
        ignored: list[str] = []
        keys_origin = None
        for origin, layer in layers:
            if origin in CHILD_WRITABLE_ORIGINS and not as_pi:
                ignored += [f"{origin}: {key}" for key in PERSON_KNOBS if key in layer]
                layer = {k: v for k, v in layer.items() if k not in PERSON_KNOBS}
            if not as_pi:
                for key, value in REFUSED_FROM_FILES:
                    if key in layer and layer[key] is value:
                        ignored.append(f"{origin}: {key}")
                        layer = {k: v for k, v in layer.items() if k != key}
            if "permissionDialogKeys" in layer:
                keys_origin = origin
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
            dialog_keys_origin=keys_origin,
            ignored_knobs=tuple(ignored),
        )
