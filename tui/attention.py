"""Getting the person's attention when asks arrive: one coalesced toast, the bell and OSC 9/777
notifications (wrapped for tmux), never more than one per burst of arrivals.

`Attention` is a part the app holds: told of each arrival, it waits `ATTENTION_COALESCE_S` for the
rest of the burst, then raises one notice and writes the signals to its `terminal` (the app's
terminal; a test passes a list's `append`).
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App

from core.person import Person
from core.vocabulary.asks import Ask
from tui.render.ask_facts import ask_label
from tui.ui_settings import NOTIFICATION_CHANNELS, UiSettings

ATTENTION_COALESCE_S = 0.05


def osc_sequence(channel: str, title: str, body: str, tmux: bool) -> str:
    """The terminal signal for one channel; OSC wrapped for tmux passthrough when inside tmux."""
    if channel == "bell":
        return "\a"
    sequence = (
        f"\x1b]9;{title}: {body}\x07" if channel == "osc9" else f"\x1b]777;notify;{title};{body}\x07"
    )
    if tmux:
        return "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return sequence


def _signal_safe(text: str) -> str:
    """Only plain printable ASCII (no `;`) goes inside an OSC sequence."""
    return "".join(c for c in text if 32 <= ord(c) < 127 and c != ";")[:120]


class Attention:
    """One notice and one set of terminal signals per burst of arrivals."""

    def __init__(self, app: App[int], person: Person, settings: UiSettings,
                 terminal: Callable[[str], None], tmux: bool) -> None:
        """`app`: where the notice goes and the coalescing timer runs; `terminal`: where signals are
        written; `tmux`: wrap them for tmux passthrough."""
        self.app = app
        self.person = person
        self.settings = settings
        self.terminal = terminal
        self.tmux = tmux
        self._arrived: list[Ask] = []
        self._coalescing = False

    @property
    def channels(self) -> tuple[str, ...]:
        extra = [c for c in self.settings.prompt_notifications if c in NOTIFICATION_CHANNELS and c != "bell"]
        return ("bell", *dict.fromkeys(extra))

    @property
    def coalescing(self) -> bool:
        """A burst's notice is still to come."""
        return self._coalescing

    def arrived(self, ask: Ask) -> None:
        self._arrived.append(ask)
        if not self._coalescing:
            self._coalescing = True
            self.app.set_timer(ATTENTION_COALESCE_S, self._flush)

    def _flush(self) -> None:
        self._coalescing = False
        asks = [a for a in self._arrived if self.person.get(a.key) is not None]
        self._arrived.clear()
        if not asks:
            return
        if len(asks) == 1:
            body = ask_label(asks[0])
            title = "Permission asked"
        else:
            body = "\n".join(ask_label(a) for a in asks[:5]) + ("\n…" if len(asks) > 5 else "")
            title = f"{len(asks)} permissions asked"
        self.app.notify(body, title=title, markup=False, timeout=8)
        pending = self.person.count()
        plain = _signal_safe(f"{pending} pending ask{'s' if pending != 1 else ''}")
        for channel in self.channels:
            self.terminal(osc_sequence(channel, "pi-authorizer", plain, self.tmux))
