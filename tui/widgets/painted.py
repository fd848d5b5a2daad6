"""`PaintProbe`: a `Static` that says when a frame showing it has really been painted.

Key safety counts from the paint, not from building or updating a widget: on a loaded machine the
two can be far apart. The compositor calls `render_lines` only while it renders the frame it is
about to write; the probe then waits for that refresh to finish (`call_after_refresh`) and reports
the token it was given, once. So a probe must stand where every frame of its screen shows it (docked,
never inside content that scrolls): a probe scrolled out of view is never rendered, and keys waiting
for its paint would wait forever.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Static


class PaintProbe(Static):
    """Call `expect(token, callback)`; `callback(token)` runs after the next frame showing this widget."""

    _token: Hashable | None = None
    _callback: Callable[[Hashable], object] | None = None

    def expect(self, token: Hashable, callback: Callable[[Hashable], object]) -> None:
        self._token, self._callback = token, callback
        self.refresh()  # the frame must be rendered again even when the text did not change

    def render_lines(self, crop: Region) -> list[Strip]:
        lines = super().render_lines(crop)
        if self._token is not None and self._callback is not None:
            token, callback = self._token, self._callback
            self._token = self._callback = None
            self.call_after_refresh(callback, token)
        return lines
