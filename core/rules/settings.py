"""The scalar knobs this node reads, merged from config files only (never from agent files).

Other pi knobs (`authorizerChain`, `promptMaxRows`, ...) are validated (`validate.py`) but not kept:
nothing here acts on them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_FORWARDING_TIMEOUT_MS = 600_000


@dataclass(frozen=True, slots=True)
class Settings:
    """Knobs with the reference defaults; a later scope's value replaces an earlier one whole."""

    yolo_mode: bool = False
    double_press_to_confirm: bool = True
    forwarding_timeout_ms: int = DEFAULT_FORWARDING_TIMEOUT_MS
    prompt_notifications: tuple[str, ...] = ()
    permission_dialog_keys: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def merged(cls, layers: Iterable[Mapping[str, Any]]) -> Settings:
        """Fold validated knob maps, lowest scope first."""
        knobs: dict[str, Any] = {}
        for layer in layers:
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
        )
