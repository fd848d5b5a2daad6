"""The change as a diff: pure extraction and rendering, literal and sanitised, bounded."""

from __future__ import annotations

from dataclasses import dataclass

from tui.render.change import MAX_LINES, FileChange, change_from_evidence, change_renderable


@dataclass(frozen=True)
class Ev:
    label: str
    text: str
    detail: str | None = None


def test_a_write_shows_its_new_content_as_added_lines() -> None:
    change = change_from_evidence("src/a.py", [Ev("path", "src/a.py"), Ev("content", "print(1)\nprint(2)\n")])
    assert change == FileChange("src/a.py", None, ("print(1)\nprint(2)\n",))
    text = change_renderable(change)
    assert "+print(1)" in text.plain and "+print(2)" in text.plain and "--- /dev/null" in text.plain
    assert "display only, not facts" in text.plain
    styles = {str(span.style) for span in text.spans}
    assert "green" in styles


def test_an_edit_shows_old_and_new_text() -> None:
    change = change_from_evidence("a.txt", [Ev("oldText", "one\ntwo\n"), Ev("newText", "one\nTWO\n")])
    assert change is not None
    plain = change_renderable(change).plain
    assert "-two" in plain and "+TWO" in plain and " one" in plain


def test_no_content_no_change() -> None:
    assert change_from_evidence("x", [Ev("command", "git push")]) is None
    assert change_from_evidence("x", []) is None


def test_child_text_is_literal_and_hidden_characters_are_tokens() -> None:
    hostile = "[bold red]x[/] \x1b]0;pwn\x07 \u202eevil"
    change = change_from_evidence("p\x1b[2J", [Ev("content", hostile)])
    assert change is not None
    plain = change_renderable(change).plain
    assert "[bold red]x[/]" in plain  # markup shown, not interpreted
    assert "\x1b" not in plain and "\u202e" not in plain and "\x07" not in plain
    assert "␛" in plain and "⟨U+202E RLO⟩" in plain


def test_work_and_output_are_bounded() -> None:
    huge = "\n".join(f"line {i}" for i in range(MAX_LINES * 3))
    change = change_from_evidence("big", [Ev("content", huge), Ev("content", "y" * 5000)])
    assert change is not None
    plain = change_renderable(change).plain
    assert f"… {MAX_LINES * 2} more lines not shown" in plain
    assert plain.count("\n") <= MAX_LINES + 10
