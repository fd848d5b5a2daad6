"""What the app takes from the pi config (filled by the CLI): confirmation, signals, keys (the keys' table and
pi's `permissionDialogKeys` map are `tui.actions`)."""

from __future__ import annotations

from dataclasses import dataclass, field

NOTIFICATION_CHANNELS = frozenset({"bell", "osc9", "osc777"})


@dataclass(frozen=True)
class UiSettings:
    """The person-facing knobs. `dialog_keys` uses pi's names (`approve`, `deny`, ...)."""

    double_press: bool = True
    prompt_notifications: tuple[str, ...] = ()
    input_grace_ms: int = 500
    dialog_keys: dict[str, str] = field(default_factory=dict)
    #: The file `dialog_keys` came from (named with the entries refused); every config file is
    #: writable by a same-user child, so any remap needs the double press (`tui.app`).
    dialog_keys_from: str = ""
    #: Person knobs a child-writable config layer tried to set (`<origin>: <knob>`): ignored, shown.
    ignored_knobs: tuple[str, ...] = ()

