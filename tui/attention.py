"""Getting the person's attention when asks arrive: one coalesced toast, the bell and OSC 9/777
notifications (wrapped for tmux), never more than one per burst of arrivals.
"""

from __future__ import annotations

from textual.app import App
from textual.timer import Timer

from core.person import HumanAuthorizer
from core.serving.asks import Ask
from tui.render.facts import ask_label
from tui.settings import NOTIFICATION_CHANNELS, UiSettings

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


class Attention(App[int]):
    """The attention signals of `AuthorizerApp` (its base class)."""

    human: HumanAuthorizer
    settings: UiSettings
    signals: list[str]
    _tmux: bool
    _new_asks: list[Ask]
    _attention_timer: Timer | None

    @property
    def signal_channels(self) -> tuple[str, ...]:
        extra = [c for c in self.settings.prompt_notifications if c in NOTIFICATION_CHANNELS and c != "bell"]
        return ("bell", *dict.fromkeys(extra))

    def _flush_attention(self) -> None:
        self._attention_timer = None
        asks = [a for a in self._new_asks if self.human.get(a.key) is not None]
        self._new_asks.clear()
        if not asks:
            return
        if len(asks) == 1:
            body = ask_label(asks[0])
            title = "Permission asked"
        else:
            body = "\n".join(ask_label(a) for a in asks[:5]) + ("\n…" if len(asks) > 5 else "")
            title = f"{len(asks)} permissions asked"
        self.notify(body, title=title, markup=False, timeout=8)
        pending = len(self.human.pending())
        plain = _signal_safe(f"{pending} pending ask{'s' if pending != 1 else ''}")
        for channel in self.signal_channels:
            self.emit_terminal_signal(osc_sequence(channel, "pi-authorizer", plain, self._tmux))

    def emit_terminal_signal(self, sequence: str) -> None:
        """Write a bell / OSC notification to the terminal; recorded in `signals` for tests."""
        self.signals.append(sequence)
        driver = self._driver
        if driver is not None and not self.is_headless:
            driver.write(sequence)
            driver.flush()
