"""Pure rendering: an ask's facts -> literal text and `Content`; no widget, no app (tested without one)."""
